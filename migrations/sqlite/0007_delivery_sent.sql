-- 0007: a webhook delivery counts the requests sent, and names the replica
-- that sent the latest (see migrations/postgres/0007_delivery_sent.sql).
ALTER TABLE webhook_deliveries ADD COLUMN sent_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_deliveries ADD COLUMN last_sent_by TEXT;
UPDATE webhook_deliveries SET sent_attempts = attempts;
