-- 0007: a webhook delivery counts the requests sent, and names the replica
-- that sent the latest.
--
-- attempts goes up when a dispatcher claims a delivery, and stays the
-- claim's fencing token; a dispatcher that died between its claim and its
-- request left a claim the receiver never saw. sent_attempts goes up just
-- before a request goes out, under the same fence, and is what
-- GET /v1/chats/{id}/deliveries reports. Deliveries made before count
-- their claims, the best this version knows of them.
ALTER TABLE webhook_deliveries
    ADD COLUMN sent_attempts int NOT NULL DEFAULT 0,
    ADD COLUMN last_sent_by  text;
UPDATE webhook_deliveries SET sent_attempts = attempts;
