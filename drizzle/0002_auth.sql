CREATE TABLE "api_keys" (
	"id" uuid PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"prefix" text NOT NULL,
	"hash" text NOT NULL,
	"admin" boolean NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_keys_hash_unique" UNIQUE("hash")
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "owner_key_id" uuid;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "work_dir" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_owner_key_id_api_keys_id_fk" FOREIGN KEY ("owner_key_id") REFERENCES "public"."api_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sessions_owner_key_id_idx" ON "sessions" USING btree ("owner_key_id");