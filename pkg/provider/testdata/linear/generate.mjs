// Linear webhooks judged by @linear/sdk's LinearWebhookClient.verify (the
// SDK verifies only; the script signs as Linear documents: hex
// HMAC-SHA256 of the raw body). Run as README.md says.
import { createHmac } from 'node:crypto';
import { sdk, load, at, judge, write } from '../npm/sdk.mjs';

const { version } = await sdk('@linear/sdk');
const { LinearWebhookClient } = await load('@linear/sdk/webhooks');
const secret = 'lin_wh_intake_conformance_secret';
const now = 1700000000000;
const client = new LinearWebhookClient(secret);
const event = (ts) => JSON.stringify({ action: 'create', type: 'Issue', createdAt: '2023-11-14T22:13:19.500Z',
  data: { id: '2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9', title: 'Café ☕ / ü' }, url: 'https://linear.app/x/issue/X-1',
  webhookTimestamp: ts, webhookId: '000042e3-d123-4980-b49f-8e140eef9329', organizationId: 'org-1' });
const mac = (key, body) => createHmac('sha256', key).update(body).digest('hex');

async function vector(name, { body = event(now - 500), sig = mac(secret, body), extra = {} } = {}) {
  return {
    name,
    secrets: [secret],
    headers: { 'Linear-Signature': sig, 'Linear-Delivery': 'c7b0a9b3-8a12-4e6f-9a54-2b8d3a1f0e11', 'Linear-Event': 'Issue' },
    body,
    now_ms: now,
    sdk: await at(now, () => judge(() => client.verify(Buffer.from(body), sig))),
    ...extra,
  };
}

const body = event(now - 500);
const vectors = [
  await vector('signed as Linear documents'),
  await vector('tampered body', { body: body.replace('Issue"', 'Comment"'), sig: mac(secret, body) }),
  await vector('another secret', { sig: mac('another', body) }),
  await vector('upper-case hex', { sig: mac(secret, body).toUpperCase(), extra: {
    intake: true, why: 'the SDK compares the hex text; Intake decodes hex in either case (the MAC must still match)' } }),
  // The SDK's window is 60 s either way; the vectors are judged at
  // tolerance 1m (the preset's window is the integration's tolerance).
  await vector('webhookTimestamp 59 s old', { body: event(now - 59000) }),
  await vector('webhookTimestamp exactly 60 s old', { body: event(now - 60000) }),
  await vector('webhookTimestamp 61 s old', { body: event(now - 61000) }),
  await vector('webhookTimestamp 61 s ahead', { body: event(now + 61000) }),
  await vector('no webhookTimestamp', { body: body.replace(/,"webhookTimestamp":\d+/, '') }),
  await vector('webhookTimestamp as a string', { body: body.replace(/"webhookTimestamp":(\d+)/, '"webhookTimestamp":"$1"') }),
];

write(import.meta.url, { provider: 'linear', sdk: '@linear/sdk', version, script: 'generate.mjs', tolerance: '1m', vectors });
