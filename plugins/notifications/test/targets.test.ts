import { describe, expect, it } from 'vitest';
import { maskTargetUrl, parseTargetUrl } from '../src/targets.js';

describe('target URLs', () => {
  it('parses each scheme', () => {
    expect(parseTargetUrl('generic+https://u:p%40ss@hooks.example.test:8443/in/x?a=1')).toMatchObject({ kind: 'generic', username: 'u', password: 'p@ss' });
    expect((parseTargetUrl('generic+https://hooks.example.test/in') as any).url.toString()).toBe('https://hooks.example.test/in');
    expect(parseTargetUrl('slack://T01AbC/B02/XyZ?channel=%23ops')).toMatchObject({
      kind: 'slack',
      botname: null,
      tokens: ['T01AbC', 'B02', 'XyZ'],
      channel: '#ops',
    });
    expect(parseTargetUrl('discord://tok_en@123?username=bot')).toMatchObject({ kind: 'discord', token: 'tok_en', webhookId: '123', username: 'bot' });
    expect(parseTargetUrl('telegram://1:abcdefghijk@telegram?chats=5,@chan_name')).toMatchObject({
      kind: 'telegram',
      token: '1:abcdefghijk',
      chats: ['5', '@chan_name'],
    });
    expect(parseTargetUrl('smtp://mail.example.test/?from=a@example.test&to=b@example.test&encryption=tls')).toMatchObject({
      kind: 'smtp',
      port: 465,
      username: '',
      encryption: 'tls',
    });
    expect(parseTargetUrl('smtp://u:p@mail.example.test:2525/?from=a@example.test&to=b@example.test,c@example.test')).toMatchObject({
      port: 2525,
      to: ['b@example.test', 'c@example.test'],
      encryption: 'auto',
    });
  });

  it('refuses what it cannot deliver to, saying why', () => {
    const why = (url: string) => {
      try {
        parseTargetUrl(url);
        return 'accepted';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(why('https://example.test/hook')).toMatch(/unsupported scheme 'https'/);
    expect(why('generic+https:///nohost')).toMatch(/host/);
    expect(why('slack://only/two')).toMatch(/tokenA\/tokenB\/tokenC/);
    expect(why('discord://@123')).toMatch(/token/);
    expect(why('discord://tok@abc')).toMatch(/numeric/);
    expect(why('telegram://1:abcdefghijk@telegram')).toMatch(/chats/);
    expect(why('telegram://1:abcdefghijk@telegram?chats=bad chat')).toMatch(/whitespace/);
    expect(why('smtp://mail.example.test/?to=b@example.test')).toMatch(/from=/);
    expect(why('smtp://mail.example.test/?from=a@example.test&to=b@example.test&encryption=ssl3')).toMatch(/encryption/);
    expect(why('generic+http://example.test/\nx')).toMatch(/control/);
  });

  it('masks every secret', () => {
    expect(maskTargetUrl('generic+https://u:secret@h.example.test/hooks/abcdef0123456789XYZ/in?token=t0k&x=1')).toBe(
      'generic+https://u:****@h.example.test/hooks/****/in?token=****&x=1',
    );
    expect(maskTargetUrl('slack://bot@T01/B02/XyZ')).toBe('slack://bot@****/****/****');
    expect(maskTargetUrl('slack://T01/B02/XyZ?channel=%23ops')).toBe('slack://****/****/****?channel=%23ops');
    expect(maskTargetUrl('discord://tok@123')).toBe('discord://****@123');
    expect(maskTargetUrl('telegram://1:abcdefghijk@telegram?chats=5')).toBe('telegram://****@telegram?chats=5');
    expect(maskTargetUrl('smtp://u:p@mail.example.test:25/?from=a@example.test&to=b@example.test')).toBe(
      'smtp://u:****@mail.example.test:25/?from=a@example.test&to=b@example.test',
    );
    expect(maskTargetUrl('nonsense')).toBe('****');
  });
});
