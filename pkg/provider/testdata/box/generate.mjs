// Box webhooks judged by box-node-sdk's WebhooksManager.validateMessage
// (the SDK verifies only; the script signs as Box documents: base64
// HMAC-SHA256 of the body followed by BOX-DELIVERY-TIMESTAMP, primary key).
// Run as README.md says.
import { createHmac } from 'node:crypto';
import { sdk, load, at, judge, write } from '../npm/sdk.mjs';

const { version } = await sdk('box-node-sdk');
const { WebhooksManager } = await load('box-node-sdk/managers');
const primary = 'SamplePrimaryKey';
const now = 1700000000000;
const sent = '2023-11-14T22:12:20Z'; // a minute before now
const body = '{"type":"webhook_event","id":"eddfbdd1-0d1b-4b0c-a1bb-5a5c5e5d5f31","created_at":"2023-11-14T14:12:20-08:00","trigger":"FILE.UPLOADED","webhook":{"id":"1234","type":"webhook"},"source":{"id":"5678","type":"file","name":"r\u00e9sum\u00e9 2023/11.pdf"}}';
const sign = (key, text, ts) => createHmac('sha256', key).update(text + ts).digest('base64');
// Box's own escaping of a body that was parsed and serialized again (the
// SDK's second try): non-ASCII as \uXXXX, / as \/.
const escaped = body.replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')).replace(/(?<!\\)\//g, '\\/');

async function vector(name, { ts = sent, sig = sign(primary, body, ts), sentBody = body, clock = now, extra = {} } = {}) {
  const headers = {
    'BOX-DELIVERY-ID': 'f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f',
    'BOX-DELIVERY-TIMESTAMP': ts,
    'BOX-SIGNATURE-ALGORITHM': 'HmacSHA256',
    'BOX-SIGNATURE-PRIMARY': sig,
    'BOX-SIGNATURE-VERSION': '1',
  };
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    name,
    secrets: [primary],
    headers,
    body: sentBody,
    now_ms: clock,
    sdk: await at(clock, () => judge(() => WebhooksManager.validateMessage(sentBody, lower, primary))),
    ...extra,
  };
}

const vectors = [
  await vector('signed as Box documents (non-ASCII and / in the body)'),
  await vector('a timestamp with an offset', { ts: '2023-11-14T14:12:20-08:00' }),
  await vector('tampered body', { sentBody: body.replace('FILE.UPLOADED', 'FILE.DELETED') }),
  await vector('another key', { sig: sign('AnotherKey', body, sent) }),
  await vector('another timestamp', { sig: sign(primary, body, '2023-11-14T22:12:21Z') }),
  await vector('11 minutes old', { clock: now + 10 * 60000 }),
  await vector('a minute in the future', { clock: now - 2 * 60000, extra: {
    intake: true, why: 'the SDK refuses any future delivery time; Intake allows clock skew of ± tolerance' } }),
  await vector('signed over the escaped body', { sig: sign(primary, escaped, sent), extra: {
    intake: false, why: 'Box signs the bytes it sends; the SDK\'s second try serves callers that parsed and re-serialized the body. Intake has the raw bytes' } }),
];

write(import.meta.url, { provider: 'box', sdk: 'box-node-sdk', version, script: 'generate.mjs', tolerance: '10m', vectors });
