// HubSpot v3 signatures, signed and judged by @hubspot/api-client
// (Signature.getSignature, Signature.isValid). Run as README.md says.
import { sdk, at, judge, write } from '../npm/sdk.mjs';

const { mod: hubspot, version } = await sdk('@hubspot/api-client');
const { Signature } = hubspot;
const secret = 'yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy'; // the SDK's own tests' secret and URL
const url = 'https://www.example.com/webhook_uri';
const body = '[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]';
const ts = 1700000000123;

async function vector(name, { signedBody = body, sentBody = signedBody, signedURL = url, publicURL = url, key = secret, now = ts + 1000, extra = {} } = {}) {
  const signature = Signature.getSignature('POST', 'v3', { clientSecret: key, url: signedURL, requestBody: signedBody, timestamp: ts });
  const sdkOK = await at(now, () => judge(() => Signature.isValid({
    signatureVersion: 'v3', method: 'POST', signature, clientSecret: secret, url: publicURL, requestBody: sentBody, timestamp: ts })));
  return {
    name,
    secrets: [secret],
    public_url: publicURL,
    headers: { 'X-HubSpot-Signature-v3': signature, 'X-HubSpot-Request-Timestamp': String(ts) },
    body: sentBody,
    now_ms: now,
    sdk: sdkOK,
    ...extra,
  };
}

const two = '[{"eventId":1001,"subscriptionType":"contact.creation","objectId":123,"occurredAt":1700000000000},{"eventId":1002,"subscriptionType":"contact.deletion","objectId":124,"occurredAt":1700000000000}]';
const vectors = [
  await vector('signed by the SDK'),
  await vector('two events, a query string in the URL', { signedBody: two,
    signedURL: url + '?portalId=62515', publicURL: url + '?portalId=62515' }),
  await vector('299 s old', { now: ts + 299000 }),
  await vector('301 s old', { now: ts + 301000 }),
  await vector('tampered body', { sentBody: body.replace('"objectId":123', '"objectId":124') }),
  await vector('another secret', { key: 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz' }),
  await vector('another URL', { signedURL: url + '/other' }),
  await vector('10 minutes in the future', { now: ts - 600000, extra: {
    intake: false, why: 'the SDK bounds only the past; Intake holds the timestamp to ± tolerance both ways' } }),
];

write(import.meta.url, { provider: 'hubspot', sdk: '@hubspot/api-client', version, script: 'generate.mjs', tolerance: '5m', vectors });
