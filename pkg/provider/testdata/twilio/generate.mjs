// Twilio form webhooks, signed and judged by twilio-node
// (getExpectedTwilioSignature, validateRequest). Run as README.md says.
import { parse } from 'node:querystring';
import { sdk, judge, write } from '../npm/sdk.mjs';

const { mod: twilio, version } = await sdk('twilio');
const token = '12345'; // Twilio's documented example
const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
const form = 'CallSid=CA1234567890ABCDE&Caller=%2B14158675310&Digits=1234&From=%2B14158675310&To=%2B18005551212';
const now = 1700000000000;

// vector signs body over signedURL with signToken, then asks validateRequest
// whether it is Twilio's for publicURL; the params are the body as an
// urlencoded body parser reads it (a repeated name: an array).
async function vector(name, { body = form, signedURL = url, publicURL = url, signToken = token, extra = {} } = {}) {
  const params = { ...parse(body) };
  const sig = twilio.getExpectedTwilioSignature(signToken, signedURL, params);
  return {
    name,
    secrets: [token],
    public_url: publicURL,
    headers: { 'X-Twilio-Signature': sig, 'I-Twilio-Idempotency-Token': 'idem-1' },
    body,
    now_ms: now,
    sdk: await judge(() => twilio.validateRequest(token, sig, publicURL, params)),
    ...extra,
  };
}

const vectors = [
  await vector("Twilio's documented example, signed by the SDK"),
  await vector('signed over the URL with :443 added', { signedURL: 'https://mycompany.com:443/myapp.php?foo=1&bar=2' }),
  await vector('public_url with :443, signed without the port', {
    signedURL: url, publicURL: 'https://mycompany.com:443/myapp.php?foo=1&bar=2' }),
  await vector('http with :80 added', { signedURL: 'http://mycompany.com:80/hook', publicURL: 'http://mycompany.com/hook' }),
  await vector('a repeated name, distinct values', { body: form + '&To=%2B18005550000' }),
  await vector('a repeated name and value', { body: form + '&To=%2B18005551212', extra: {
    intake: false,
    why: 'twilio-node drops a repeated identical pair (new Set); Intake signs every pair as sent (twilio-go: the first value of a name only). No documented Twilio request repeats a name.' } }),
  await vector('another URL', { signedURL: 'https://mycompany.com/other.php?foo=1&bar=2' }),
  await vector('another token', { signToken: '54321' }),
];
// A changed parameter under the example's signature.
const tampered = { ...vectors[0], name: 'a changed digit', body: form.replace('Digits=1234', 'Digits=1235') };
tampered.sdk = await judge(() => twilio.validateRequest(token, tampered.headers['X-Twilio-Signature'], url, { ...parse(tampered.body) }));
vectors.push(tampered);

write(import.meta.url, { provider: 'twilio', sdk: 'twilio', version, script: 'generate.mjs', vectors });
