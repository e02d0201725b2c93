CREATE TABLE "server_secrets" (
	"name" text PRIMARY KEY NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "runs_created_at_id_idx" ON "runs" USING btree ("created_at" DESC NULLS LAST,"id" DESC NULLS LAST);