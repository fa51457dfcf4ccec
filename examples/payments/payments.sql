CREATE TABLE IF NOT EXISTS payments (key text PRIMARY KEY, amount bigint NOT NULL);
CREATE OR REPLACE FUNCTION apply_payment(body jsonb, k text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF (body->>'amount')::bigint <= 0 THEN
    RAISE EXCEPTION 'amount must be positive' USING ERRCODE = 'IK001'; -- failed, not retried
  END IF;
  INSERT INTO payments (key, amount) VALUES (k, (body->>'amount')::bigint);
END $$;
