-- +goose Up
-- Outbox payloads are webhook bodies kept for days, written once and read
-- once: compression speed matters more than ratio. pglz (the default) took
-- most of Postgres's time for 16 KiB bodies; lz4 is several times faster.
-- A server built without lz4 keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE intake.outbox ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server; outbox payloads stay pglz-compressed';
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE intake.outbox ALTER COLUMN payload SET COMPRESSION default;
