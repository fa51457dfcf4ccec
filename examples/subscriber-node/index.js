// An Intake subscriber in Node: each processed event changes the database
// once. The rule (intake subscriber schema): in one transaction, claim the
// Intake-Key, make the change, commit; ack only after the commit.
const { connect, AckPolicy, nanos } = require("nats");
const { Pool } = require("pg");

const env = process.env;
const durable = env.DURABLE || "node-subscriber";
// REEXECUTE=1 applies an operator's re-execution (same key, new execution id) again.
const claim = `INSERT INTO intake_subscriber.${env.REEXECUTE === "1" ? "handled_executions" : "handled"}
  (consumer, key, execution_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING key`;
const killAfterCommit = new Set((env.KILL_AFTER_COMMIT || "").split(",")); // a fault hook for the tests

async function main() {
  const pool = new Pool({ connectionString: env.DATABASE_URL });
  const nc = await connect({ servers: env.NATS_URL || "nats://127.0.0.1:4222" });
  await (await nc.jetstreamManager()).consumers.add("INTAKE_OUT", {
    durable_name: durable, ack_policy: AckPolicy.Explicit, ack_wait: nanos(Number(env.ACK_WAIT_MS || 30000)),
    filter_subject: `intake.out.${env.TENANT || "acme"}.>`,
  });
  const consumer = await nc.jetstream().consumers.get("INTAKE_OUT", durable);
  for await (const m of await consumer.consume()) {
    const key = m.headers.get("Intake-Key"), execution = m.headers.get("Intake-Execution-Id");
    const db = await pool.connect();
    try {
      await db.query("BEGIN");
      const claimed = (await db.query(claim, [durable, key, execution])).rowCount === 1;
      if (claimed) { // the change, in the claim's transaction; a redelivery skips it
        await db.query("INSERT INTO example_subscriber.events (key, execution_id, event_type, body) VALUES ($1, $2, $3, $4)",
          [key, execution, m.headers.get("Intake-Event-Type"), m.string()]);
      }
      await db.query("COMMIT");
      if (claimed && killAfterCommit.has(`${key}|${execution}`)) process.kill(process.pid, "SIGKILL");
      m.ack();
    } catch (err) {
      await db.query("ROLLBACK").catch(() => {});
      console.error(`${key}: ${err.message}`);
      m.nak(1000 * Math.min(m.info.redeliveryCount, 30));
    } finally {
      db.release();
    }
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
