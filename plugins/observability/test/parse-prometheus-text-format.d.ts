declare module 'parse-prometheus-text-format' {
  interface Family {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'SUMMARY' | 'HISTOGRAM' | 'UNTYPED';
    metrics: { value?: string; labels?: Record<string, string>; timestamp_ms?: string }[];
  }
  export default function parse(text: string): Family[];
}
