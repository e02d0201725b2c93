CREATE TABLE "key_spend" (
	"key_id" uuid NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"cost_usd" double precision DEFAULT 0 NOT NULL,
	CONSTRAINT "key_spend_key_id_period_start_pk" PRIMARY KEY("key_id","period_start")
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "permission_modes" jsonb;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "work_roots" jsonb;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "max_budget_usd" double precision;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "worktrees" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "key_spend" ADD CONSTRAINT "key_spend_key_id_api_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."api_keys"("id") ON DELETE cascade ON UPDATE no action;