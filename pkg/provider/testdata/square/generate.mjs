// Square webhooks judged by the square SDK's WebhooksHelper.verifySignature
// (the SDK verifies only; the script signs as Square documents: base64
// HMAC-SHA256 of the notification URL followed by the body). Run as
// README.md says.
import { createHmac } from 'node:crypto';
import { sdk, judge, write } from '../npm/sdk.mjs';

const { mod, version } = await sdk('square');
const { WebhooksHelper } = mod;
const key = 'Ibxx_5AKakO-3qeNVR61Dw'; // the key of the SDK's own tests
const url = 'https://hooks.example.com/webhooks/square?tenant=acme';
const body = '{"merchant_id":"MLEFBHHSJGVHD","type":"payment.updated","event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc","created_at":"2023-11-14T22:13:20Z","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","object":{"payment":{"note":"Café ☕"}}}}';
const sign = (k, u, b) => createHmac('sha256', k).update(u + b).digest('base64');

async function vector(name, { signedURL = url, publicURL = url, sentBody = body, k = key } = {}) {
  const sig = sign(k, signedURL, body);
  return {
    name,
    secrets: [key],
    public_url: publicURL,
    headers: { 'x-square-hmacsha256-signature': sig },
    body: sentBody,
    now_ms: 1700000000000,
    sdk: await judge(() => WebhooksHelper.verifySignature({ requestBody: sentBody, signatureHeader: sig, signatureKey: key, notificationUrl: publicURL })),
  };
}

const vectors = [
  await vector('signed as Square documents (a query string, non-ASCII)'),
  await vector('tampered body', { sentBody: body.replace('payment.updated', 'payment.created') }),
  await vector('another key', { k: 'another-key' }),
  await vector('another URL', { signedURL: url.replace('?', '/?') }),
];

write(import.meta.url, { provider: 'square', sdk: 'square', version, script: 'generate.mjs', vectors });
