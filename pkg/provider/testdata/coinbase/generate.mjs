// Coinbase Commerce webhooks, signed and judged by coinbase-commerce-node
// (Webhook.computeSignature, Webhook.verifySigHeader). Run as README.md says.
import { sdk, judge, write } from '../npm/sdk.mjs';

const { mod, version } = await sdk('coinbase-commerce-node');
const { Webhook } = mod;
const secret = 'coinbase-shared-secret';
const body = '{"id":1,"scheduled_for":"2023-11-14T22:13:20Z","event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","resource":"event","type":"charge:created","api_version":"2018-03-22","created_at":"2023-11-14T22:13:20Z","data":{"code":"66BEOV2A","name":"Café"}}}';

async function vector(name, { sig = Webhook.computeSignature(body, secret), sentBody = body, extra = {} } = {}) {
  return {
    name,
    secrets: [secret],
    headers: { 'X-CC-Webhook-Signature': sig },
    body: sentBody,
    now_ms: 1700000000000,
    sdk: await judge(() => Webhook.verifySigHeader(sentBody, sig, secret)),
    ...extra,
  };
}

const vectors = [
  await vector('signed by the SDK'),
  await vector('tampered body', { sentBody: body.replace('charge:created', 'charge:confirmed') }),
  await vector('another secret', { sig: Webhook.computeSignature(body, 'another') }),
  await vector('upper-case hex', { sig: Webhook.computeSignature(body, secret).toUpperCase(), extra: {
    intake: true, why: 'the SDK compares the hex text; Intake decodes hex in either case (the MAC must still match)' } }),
];

write(import.meta.url, { provider: 'coinbase', sdk: 'coinbase-commerce-node', version, script: 'generate.mjs', vectors });
