CREATE TABLE "instances" (
	"id" uuid PRIMARY KEY NOT NULL,
	"host" text NOT NULL,
	"boot_id" text,
	"pid" integer NOT NULL,
	"version" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"heartbeat_at" timestamp with time zone NOT NULL,
	"lease_expires_at" timestamp with time zone NOT NULL,
	"reaped_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "instance_id" uuid;--> statement-breakpoint
CREATE INDEX "runs_instance_unfinished_idx" ON "runs" USING btree ("instance_id") WHERE "runs"."status" in ('queued', 'running', 'waiting');