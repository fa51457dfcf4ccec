// Adyen standard webhooks, each item signed and judged by
// @adyen/api-library's hmacValidator (calculateHmac, validateHMAC).
// Run as README.md says.
import { sdk, judge, write } from '../npm/sdk.mjs';

const { mod, version } = await sdk('@adyen/api-library');
const hmac = new mod.hmacValidator();
const key = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056'; // Adyen's published example key

// signed returns the item with the SDK's signature in additionalData.
function signed(item, signKey = key) {
  const copy = structuredClone(item);
  copy.additionalData = { ...(copy.additionalData ?? {}), hmacSignature: hmac.calculateHmac(item, signKey) };
  return copy;
}

async function vector(name, items, extra = {}) {
  const body = JSON.stringify({ live: 'false', notificationItems: items.map((i) => ({ NotificationRequestItem: i })) });
  let ok = true;
  for (const i of items) ok = ok && await judge(() => hmac.validateHMAC(i, key));
  return { name, secrets: [key], headers: {}, body, now_ms: 1700000000000, sdk: ok, ...extra };
}

const example = { additionalData: {}, amount: { value: 1130, currency: 'EUR' }, pspReference: '7914073381342284',
  eventCode: 'AUTHORISATION', merchantAccountCode: 'TestMerchant', merchantReference: 'TestPayment-1407325143704',
  paymentMethod: 'visa', success: 'true' };
const capture = { amount: { value: 500, currency: 'EUR' }, pspReference: '8816178952380553', originalReference: '7914073381342284',
  eventCode: 'CAPTURE', merchantAccountCode: 'TestMerchant', merchantReference: 'order:42/ü', success: 'true' };
const refused = { amount: { value: 0, currency: 'USD' }, pspReference: '9916178952380554', eventCode: 'AUTHORISATION',
  merchantAccountCode: 'TestMerchant', merchantReference: '', success: 'false', reason: 'Refused' };
const tampered = signed(capture);
tampered.amount = { value: 50000, currency: 'EUR' };

const vectors = [
  await vector("Adyen's published example, signed by the SDK", [signed(example)]),
  await vector('an original reference, a colon and non-ASCII in merchantReference', [signed(capture)]),
  await vector('refused, amount 0, no originalReference', [signed(refused)]),
  await vector('three items', [signed(example), signed(capture), signed(refused)]),
  await vector('one item tampered: the whole delivery', [signed(example), tampered]),
  await vector('another key', [signed(example, '00'.repeat(32))]),
  await vector('a colon in pspReference', [signed({ ...refused, pspReference: '9916:1' })], {
    intake: false, why: 'the fields are joined with ":" unescaped; Intake refuses a colon in any field but merchantReference, so one signed text reads one way' }),
];

write(import.meta.url, { provider: 'adyen', sdk: '@adyen/api-library', version, script: 'generate.mjs', vectors });
