// WorkOS webhooks, signed and judged by @workos-inc/node
// (webhooks.computeSignature, webhooks.verifyHeader: 180 s, past only).
// Run as README.md says.
import { sdk, at, judge, write } from '../npm/sdk.mjs';

const { mod, version } = await sdk('@workos-inc/node');
const workos = new mod.WorkOS('sk_test_intake_conformance');
const secret = 'whsec_workos_intake_conformance';
const now = 1700000000000;
const body = '{"id":"event_01HF8X2Y3Z","event":"user.created","data":{"object":"user","id":"user_01HF8X","email":"ana@example.com"},"created_at":"2023-11-14T22:13:19.000Z"}';

async function vector(name, { ts = now - 30000, sentBody = body, key = secret, sep = ', ', clock = now, extra = {} } = {}) {
  const sig = await workos.webhooks.computeSignature(ts, body, key);
  const header = `t=${ts}${sep}v1=${sig}`;
  return {
    name,
    secrets: [secret],
    headers: { 'WorkOS-Signature': header },
    body: sentBody,
    now_ms: clock,
    sdk: await at(clock, () => judge(() => workos.webhooks.verifyHeader({ payload: sentBody, sigHeader: header, secret }))),
    ...extra,
  };
}

const vectors = [
  await vector('signed by the SDK'),
  await vector('tampered body', { sentBody: body.replace('user.created', 'user.deleted') }),
  await vector('another secret', { key: 'whsec_other' }),
  await vector('179 s old', { ts: now - 179000 }),
  await vector('181 s old', { ts: now - 181000 }),
  await vector('10 minutes in the future', { ts: now + 600000 }),
  await vector('no space after the comma', { sep: ',', extra: {
    intake: false, why: 'WorkOS sends ", " between the pairs; the preset splits on exactly that, the SDK on ","' } }),
];

write(import.meta.url, { provider: 'workos', sdk: '@workos-inc/node', version, script: 'generate.mjs', tolerance: '3m', vectors });
