// The managed object store: a small S3-compatible server (path-style) with AWS Signature V4 authentication,
// run by Node with no dependencies inside the image the backups plugin builds. Objects are files named by the
// SHA-256 of their key (so a key can never become a path), with a JSON sidecar for their metadata.
// Env: S3_ACCESS_KEY, S3_SECRET_KEY (required), S3_DATA (default /data), S3_PORT (default 9000).
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

const ACCESS = process.env.S3_ACCESS_KEY;
const SECRET = process.env.S3_SECRET_KEY;
const DATA = process.env.S3_DATA ?? '/data';
const PORT = Number(process.env.S3_PORT ?? 9000);
if (!ACCESS || !SECRET) {
  console.error('S3_ACCESS_KEY and S3_SECRET_KEY are required');
  process.exit(2);
}
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';

class S3Error extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// ---- storage ----------------------------------------------------------------------------------------------------
const bucketsDir = join(DATA, 'buckets');
const uploadsDir = join(DATA, 'uploads');
mkdirSync(bucketsDir, { recursive: true });
mkdirSync(uploadsDir, { recursive: true });

/** bucket → { created, objects: Map<key, meta> } */
const buckets = new Map();
for (const name of readdirSync(bucketsDir)) {
  const dir = join(bucketsDir, name);
  const info = existsSync(join(dir, '.bucket.json')) ? JSON.parse(readFileSync(join(dir, '.bucket.json'), 'utf8')) : { created: new Date().toISOString() };
  const objects = new Map();
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.json') || f.startsWith('.')) continue;
    try {
      const meta = JSON.parse(readFileSync(join(dir, f), 'utf8'));
      objects.set(meta.key, meta);
    } catch {
      /* a sidecar cut by a crash: the object is not listed */
    }
  }
  buckets.set(name, { created: info.created, objects });
}

const keyFile = (bucket, key) => join(bucketsDir, bucket, createHash('sha256').update(key).digest('hex'));
const getBucket = (name) => {
  const b = buckets.get(name);
  if (!b) throw new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist');
  return b;
};

// ---- Signature V4 -----------------------------------------------------------------------------------------------
const hmac = (key, data) => createHmac('sha256', key).update(data).digest();
const sha256hex = (data) => createHash('sha256').update(data).digest('hex');
const rfc3986 = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function canonicalQuery(raw) {
  if (!raw) return '';
  return raw
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const i = pair.indexOf('=');
      const k = decodeURIComponent((i === -1 ? pair : pair.slice(0, i)).replace(/\+/g, '%20'));
      const v = i === -1 ? '' : decodeURIComponent(pair.slice(i + 1).replace(/\+/g, '%20'));
      return [rfc3986(k), rfc3986(v)];
    })
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function authenticate(req, rawPath, rawQuery) {
  const header = req.headers.authorization;
  if (!header) throw new S3Error(403, 'AccessDenied', 'Anonymous access is not allowed');
  const m = /^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(header.trim());
  if (!m) throw new S3Error(400, 'AuthorizationHeaderMalformed', 'Only AWS Signature Version 4 is supported');
  const [access, date, region, service, term] = m[1].split('/');
  if (access !== ACCESS) throw new S3Error(403, 'InvalidAccessKeyId', 'The access key id does not exist');
  if (service !== 's3' || term !== 'aws4_request') throw new S3Error(400, 'AuthorizationHeaderMalformed', 'bad credential scope');
  const amzDate = req.headers['x-amz-date'];
  if (typeof amzDate !== 'string' || !/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== date) throw new S3Error(403, 'AccessDenied', 'bad x-amz-date');
  const when = Date.parse(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  if (Math.abs(Date.now() - when) > 15 * 60_000)
    throw new S3Error(403, 'RequestTimeTooSkewed', 'The difference between the request time and the server time is too large');
  const signed = m[2].split(';');
  const payload = req.headers['x-amz-content-sha256'];
  if (typeof payload !== 'string') throw new S3Error(400, 'InvalidRequest', 'x-amz-content-sha256 is required');
  const headers = signed
    .map((h) => {
      const v = req.headers[h];
      return `${h}:${(Array.isArray(v) ? v.join(',') : (v ?? '')).trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
  const canonical = [req.method, rawPath, canonicalQuery(rawQuery), headers, m[2], payload].join('\n');
  const scope = `${date}/${region}/${service}/${term}`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256hex(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${SECRET}`, date), region), service), term);
  const expected = hmac(key, toSign);
  if (!timingSafeEqual(expected, Buffer.from(m[3], 'hex'))) {
    throw new S3Error(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided');
  }
  return payload;
}

/** Decodes `aws-chunked` bodies: `<hex size>[;chunk-signature=…]\r\n<data>\r\n` … `0…\r\n[trailers]\r\n`. */
function awsChunkedDecoder() {
  let buf = Buffer.alloc(0);
  let remaining = 0; // data bytes left in the current chunk
  let skipCrlf = false;
  let done = false;
  return new Transform({
    transform(chunk, _enc, cb) {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      try {
        for (;;) {
          if (done) {
            buf = Buffer.alloc(0);
            break;
          }
          if (remaining > 0) {
            if (!buf.length) break;
            const take = Math.min(remaining, buf.length);
            this.push(buf.subarray(0, take));
            buf = buf.subarray(take);
            remaining -= take;
            if (remaining === 0) skipCrlf = true;
            continue;
          }
          if (skipCrlf) {
            if (buf.length < 2) break;
            buf = buf.subarray(2);
            skipCrlf = false;
          }
          const eol = buf.indexOf('\r\n');
          if (eol === -1) break;
          const size = parseInt(buf.subarray(0, eol).toString('latin1').split(';')[0], 16);
          if (!Number.isFinite(size)) throw new S3Error(400, 'IncompleteBody', 'bad aws-chunked encoding');
          buf = buf.subarray(eol + 2);
          if (size === 0) done = true;
          else remaining = size;
        }
        cb();
      } catch (err) {
        cb(err);
      }
    },
  });
}

/** Streams the request body into `path`, returning size, MD5 and SHA-256. */
async function receive(req, path, payload) {
  const md5 = createHash('md5');
  const sha = createHash('sha256');
  let size = 0;
  const tap = new Transform({
    transform(chunk, _enc, cb) {
      md5.update(chunk);
      sha.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
  });
  const stages = [req];
  if (payload.startsWith('STREAMING-')) stages.push(awsChunkedDecoder());
  stages.push(tap, createWriteStream(path));
  try {
    await pipeline(stages);
    const sha256 = sha.digest('hex');
    if (/^[0-9a-f]{64}$/.test(payload) && payload !== sha256)
      throw new S3Error(400, 'XAmzContentSHA256Mismatch', 'The provided x-amz-content-sha256 header does not match what was computed');
    return { size, md5: md5.digest('hex'), md5raw: null };
  } catch (err) {
    await rm(path, { force: true });
    throw err;
  }
}

const metaFrom = (req) => {
  const metadata = {};
  for (const [k, v] of Object.entries(req.headers)) if (k.startsWith('x-amz-meta-')) metadata[k.slice(11)] = String(v);
  return { content_type: req.headers['content-type'] ?? 'application/octet-stream', metadata };
};

async function storeObject(bucket, key, tmp, size, etag, meta) {
  const file = keyFile(bucket, key);
  await rename(tmp, file);
  const record = { key, size, etag, last_modified: new Date().toISOString(), ...meta };
  await writeFile(`${file}.json.tmp`, JSON.stringify(record));
  await rename(`${file}.json.tmp`, `${file}.json`);
  getBucket(bucket).objects.set(key, record);
  return record;
}

// ---- XML --------------------------------------------------------------------------------------------------------
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const xml = (res, status, body) => {
  const text = `<?xml version="1.0" encoding="UTF-8"?>\n${body}`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

function listObjects(res, bucketName, q) {
  const bucket = getBucket(bucketName);
  const prefix = q.get('prefix') ?? '';
  const delimiter = q.get('delimiter') ?? '';
  const max = Math.max(0, Math.min(1000, Number(q.get('max-keys') ?? 1000)));
  const v2 = q.get('list-type') === '2';
  const token = q.get('continuation-token');
  const after = token ? Buffer.from(token, 'base64url').toString('utf8') : v2 ? (q.get('start-after') ?? '') : (q.get('marker') ?? '');
  const keys = [...bucket.objects.keys()].filter((k) => k.startsWith(prefix) && k > after).sort();
  const contents = [];
  const prefixes = new Set();
  let truncated = false;
  let last = '';
  for (const k of keys) {
    if (contents.length + prefixes.size >= max) {
      truncated = true;
      break;
    }
    if (delimiter) {
      const i = k.indexOf(delimiter, prefix.length);
      if (i !== -1) {
        const p = k.slice(0, i + delimiter.length);
        if (!prefixes.has(p)) prefixes.add(p);
        last = k;
        continue;
      }
    }
    contents.push(bucket.objects.get(k));
    last = k;
  }
  const items = contents
    .map(
      (o) =>
        `<Contents><Key>${esc(o.key)}</Key><LastModified>${o.last_modified}</LastModified><ETag>&quot;${o.etag}&quot;</ETag><Size>${o.size}</Size><StorageClass>STANDARD</StorageClass></Contents>`,
    )
    .join('');
  const common = [...prefixes].map((p) => `<CommonPrefixes><Prefix>${esc(p)}</Prefix></CommonPrefixes>`).join('');
  const next = truncated
    ? v2
      ? `<NextContinuationToken>${Buffer.from(last).toString('base64url')}</NextContinuationToken>`
      : `<NextMarker>${esc(last)}</NextMarker>`
    : '';
  xml(
    res,
    200,
    `<ListBucketResult xmlns="${XMLNS}"><Name>${esc(bucketName)}</Name><Prefix>${esc(prefix)}</Prefix>${v2 ? `<KeyCount>${contents.length + prefixes.size}</KeyCount>` : ''}<MaxKeys>${max}</MaxKeys>${delimiter ? `<Delimiter>${esc(delimiter)}</Delimiter>` : ''}<IsTruncated>${truncated}</IsTruncated>${next}${items}${common}</ListBucketResult>`,
  );
}

// ---- request handling -------------------------------------------------------------------------------------------
async function handle(req, res) {
  const url = req.url ?? '/';
  const qi = url.indexOf('?');
  const rawPath = qi === -1 ? url : url.slice(0, qi);
  const rawQuery = qi === -1 ? '' : url.slice(qi + 1);
  const q = new URLSearchParams(rawQuery);
  const payload = authenticate(req, rawPath, rawQuery);
  const parts = rawPath.split('/');
  const bucketName = decodeURIComponent(parts[1] ?? '');
  const key = parts.length > 2 ? decodeURIComponent(parts.slice(2).join('/')) : '';
  const m = req.method;

  if (!bucketName) {
    if (m !== 'GET') throw new S3Error(405, 'MethodNotAllowed', 'method not allowed');
    const list = [...buckets.entries()]
      .sort()
      .map(([n, b]) => `<Bucket><Name>${esc(n)}</Name><CreationDate>${b.created}</CreationDate></Bucket>`)
      .join('');
    return xml(
      res,
      200,
      `<ListAllMyBucketsResult xmlns="${XMLNS}"><Owner><ID>agent</ID><DisplayName>agent</DisplayName></Owner><Buckets>${list}</Buckets></ListAllMyBucketsResult>`,
    );
  }
  if (!BUCKET_RE.test(bucketName)) throw new S3Error(400, 'InvalidBucketName', 'The specified bucket is not valid');

  if (!key) {
    if (m === 'PUT') {
      if (buckets.has(bucketName))
        throw new S3Error(409, 'BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it');
      mkdirSync(join(bucketsDir, bucketName), { recursive: true });
      const created = new Date().toISOString();
      await writeFile(join(bucketsDir, bucketName, '.bucket.json'), JSON.stringify({ created }));
      buckets.set(bucketName, { created, objects: new Map() });
      res.writeHead(200, { location: `/${bucketName}`, 'content-length': 0 });
      return res.end();
    }
    if (m === 'DELETE') {
      const b = getBucket(bucketName);
      if (b.objects.size) throw new S3Error(409, 'BucketNotEmpty', 'The bucket you tried to delete is not empty');
      await rm(join(bucketsDir, bucketName), { recursive: true, force: true });
      buckets.delete(bucketName);
      res.writeHead(204);
      return res.end();
    }
    if (m === 'HEAD') {
      getBucket(bucketName);
      res.writeHead(200, { 'content-length': 0 });
      return res.end();
    }
    if (m === 'GET') {
      if (q.has('location')) return xml(res, 200, `<LocationConstraint xmlns="${XMLNS}"></LocationConstraint>`);
      return listObjects(res, bucketName, q);
    }
    throw new S3Error(405, 'MethodNotAllowed', 'method not allowed');
  }

  const bucket = getBucket(bucketName);
  // Multipart uploads.
  if (m === 'POST' && q.has('uploads')) {
    const id = randomBytes(16).toString('hex');
    mkdirSync(join(uploadsDir, id));
    await writeFile(join(uploadsDir, id, 'info.json'), JSON.stringify({ bucket: bucketName, key, ...metaFrom(req) }));
    return xml(
      res,
      200,
      `<InitiateMultipartUploadResult xmlns="${XMLNS}"><Bucket>${esc(bucketName)}</Bucket><Key>${esc(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`,
    );
  }
  const uploadId = q.get('uploadId');
  if (uploadId !== null) {
    if (!/^[0-9a-f]{32}$/.test(uploadId) || !existsSync(join(uploadsDir, uploadId)))
      throw new S3Error(404, 'NoSuchUpload', 'The specified upload does not exist');
    const dir = join(uploadsDir, uploadId);
    if (m === 'PUT') {
      const n = Number(q.get('partNumber'));
      if (!Number.isInteger(n) || n < 1 || n > 10000) throw new S3Error(400, 'InvalidArgument', 'bad partNumber');
      const got = await receive(req, join(dir, `part-${n}`), payload);
      await writeFile(join(dir, `part-${n}.md5`), got.md5);
      res.writeHead(200, { etag: `"${got.md5}"`, 'content-length': 0 });
      return res.end();
    }
    if (m === 'DELETE') {
      await rm(dir, { recursive: true, force: true });
      res.writeHead(204);
      return res.end();
    }
    if (m === 'POST') {
      const body = await new Promise((resolve, reject) => {
        const chunks = [];
        let n = 0;
        req.on('data', (c) => {
          n += c.length;
          if (n > 1024 * 1024) reject(new S3Error(400, 'MalformedXML', 'body too large'));
          chunks.push(c);
        });
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        req.on('error', reject);
      });
      const numbers = [...body.matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((x) => Number(x[1]));
      if (!numbers.length) throw new S3Error(400, 'MalformedXML', 'no parts');
      const info = JSON.parse(await readFile(join(dir, 'info.json'), 'utf8'));
      const tmp = join(dir, 'assembled');
      const out = createWriteStream(tmp);
      const md5s = [];
      let size = 0;
      for (const n of numbers) {
        const part = join(dir, `part-${n}`);
        if (!existsSync(part)) throw new S3Error(400, 'InvalidPart', `part ${n} was not uploaded`);
        md5s.push(Buffer.from(await readFile(`${part}.md5`, 'utf8'), 'hex'));
        size += (await stat(part)).size;
        await pipeline(createReadStream(part), out, { end: false });
      }
      await new Promise((resolve, reject) => out.end((err) => (err ? reject(err) : resolve())));
      const etag = `${createHash('md5').update(Buffer.concat(md5s)).digest('hex')}-${numbers.length}`;
      await storeObject(info.bucket, info.key, tmp, size, etag, { content_type: info.content_type, metadata: info.metadata });
      await rm(dir, { recursive: true, force: true });
      return xml(
        res,
        200,
        `<CompleteMultipartUploadResult xmlns="${XMLNS}"><Location>/${esc(bucketName)}/${esc(key)}</Location><Bucket>${esc(bucketName)}</Bucket><Key>${esc(key)}</Key><ETag>&quot;${etag}&quot;</ETag></CompleteMultipartUploadResult>`,
      );
    }
  }

  if (m === 'PUT') {
    const tmp = `${keyFile(bucketName, key)}.upload-${randomBytes(4).toString('hex')}`;
    const got = await receive(req, tmp, payload);
    const record = await storeObject(bucketName, key, tmp, got.size, got.md5, metaFrom(req));
    res.writeHead(200, { etag: `"${record.etag}"`, 'content-length': 0 });
    return res.end();
  }
  const obj = bucket.objects.get(key);
  if (m === 'DELETE') {
    if (obj) {
      bucket.objects.delete(key);
      await rm(keyFile(bucketName, key), { force: true });
      await rm(`${keyFile(bucketName, key)}.json`, { force: true });
    }
    res.writeHead(204);
    return res.end();
  }
  if (m === 'GET' || m === 'HEAD') {
    if (!obj) {
      if (m === 'HEAD') {
        res.writeHead(404);
        return res.end();
      }
      throw new S3Error(404, 'NoSuchKey', 'The specified key does not exist.');
    }
    const headers = {
      'content-type': obj.content_type,
      'content-length': obj.size,
      etag: `"${obj.etag}"`,
      'last-modified': new Date(obj.last_modified).toUTCString(),
      'accept-ranges': 'none',
    };
    for (const [k, v] of Object.entries(obj.metadata ?? {})) headers[`x-amz-meta-${k}`] = v;
    res.writeHead(200, headers);
    if (m === 'HEAD') return res.end();
    return pipeline(createReadStream(keyFile(bucketName, key)), res);
  }
  throw new S3Error(405, 'MethodNotAllowed', 'method not allowed');
}

const server = createServer((req, res) => {
  handle(req, res).catch((err) => {
    const e = err instanceof S3Error ? err : new S3Error(500, 'InternalError', 'We encountered an internal error. Please try again.');
    if (!(err instanceof S3Error)) console.error(err);
    if (res.headersSent) return res.destroy();
    req.resume();
    if (req.method === 'HEAD') {
      res.writeHead(e.status);
      return res.end();
    }
    xml(res, e.status, `<Error><Code>${e.code}</Code><Message>${esc(e.message)}</Message><RequestId>${randomBytes(8).toString('hex')}</RequestId></Error>`);
  });
});
server.listen(PORT, () => console.log(`object store listening on :${PORT}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
