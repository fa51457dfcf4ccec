// An HTTP destination of Intake's dispatcher in Node: each event changes the
// database once, however often it is retried. Verify the Standard Webhooks
// signature over the raw body (401, nothing written); in one transaction
// claim the webhook-id in intake_subscriber.handled and, only if the claim
// is new, make the change; commit; answer. A retry finds the claim: 200.
const http = require("node:http");
const { Webhook } = require("standardwebhooks");
const { Pool } = require("pg");

const env = process.env;
const name = env.RECEIVER_NAME || "example-receiver"; // the claim's consumer
const secrets = (env.WEBHOOK_SECRET || "").split(" ").filter(Boolean).map((s) => new Webhook(s)); // several while rotating
const killAfterCommit = new Set((env.KILL_AFTER_COMMIT || "").split(",")); // a fault hook for the tests
const maxBody = 1 << 20; // Intake's default body limit
const claim = `INSERT INTO intake_subscriber.handled (consumer, key, execution_id) VALUES ($1, $2, $3)
  ON CONFLICT DO NOTHING RETURNING key`;
const change = "INSERT INTO example_receiver.events (webhook_id, key, event_type, body) VALUES ($1, $2, $3, $4)";
if (!secrets.length || !env.DATABASE_URL) throw new Error("WEBHOOK_SECRET (whsec_…) and DATABASE_URL are required");
const pool = new Pool({ connectionString: env.DATABASE_URL });

// verified: any configured secret signed "{id}.{timestamp}.{body}", and the timestamp is within 5 minutes.
function verified(body, headers) {
  return secrets.some((wh) => {
    try { wh.verify(body, headers, { jsonParse: false }); return true; } catch { return false; }
  });
}

function asJSON(body) { // the body for the jsonb column, null when it is not JSON
  try { JSON.parse(body); return body.toString(); } catch { return null; }
}

// apply returns 204 when it made the change, 200 when an earlier request had.
async function apply(id, headers, body) {
  const db = await pool.connect();
  let claimed, failed;
  try {
    await db.query("BEGIN");
    claimed = (await db.query(claim, [name, id, headers["intake-execution-id"] || ""])).rowCount === 1;
    if (claimed) { // the change, in the claim's transaction; a retry skips it
      await db.query(change, [id, headers["intake-key"], headers["intake-event-type"], asJSON(body)]);
    }
    await db.query("COMMIT");
  } catch (err) {
    failed = err;
    await db.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    db.release(failed); // a failed connection is dropped, not reused
  }
  if (claimed && killAfterCommit.has(id)) process.kill(process.pid, "SIGKILL"); // committed, not answered
  return claimed ? 204 : 200;
}

const server = http.createServer((req, res) => {
  if (req.method !== "POST") return res.writeHead(405).end();
  const chunks = [];
  let size = 0;
  req.on("data", (c) => { size += c.length; if (size <= maxBody) chunks.push(c); });
  req.on("end", async () => {
    if (size > maxBody) return res.writeHead(413).end();
    const body = Buffer.concat(chunks);
    if (!verified(body, req.headers)) return res.writeHead(401).end();
    const id = req.headers["webhook-id"];
    try {
      res.writeHead(await apply(id, req.headers, body)).end();
    } catch (err) {
      console.error(`${id}: ${err.message}`);
      res.writeHead(500).end();
    }
  });
});

const listen = env.LISTEN || "127.0.0.1:8090";
const at = listen.lastIndexOf(":");
server.listen(Number(listen.slice(at + 1)), listen.slice(0, at), () => console.log(`listening on ${listen}`));
