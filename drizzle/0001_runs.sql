ALTER TABLE "run_events" ALTER COLUMN "data" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "run_events" ADD COLUMN "public_seq" integer;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "pgid" integer;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "idempotency_key" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "request_hash" text;--> statement-breakpoint
CREATE UNIQUE INDEX "run_events_run_id_public_seq" ON "run_events" USING btree ("run_id","public_seq");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_active_per_session" ON "runs" USING btree ("session_id") WHERE "runs"."status" in ('queued', 'running');--> statement-breakpoint
CREATE UNIQUE INDEX "runs_session_idempotency_key" ON "runs" USING btree ("session_id","idempotency_key") WHERE "runs"."idempotency_key" is not null;