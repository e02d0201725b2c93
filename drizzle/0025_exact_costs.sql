ALTER TABLE "key_spend" ALTER COLUMN "cost_usd" SET DATA TYPE numeric(20, 10);--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "cost_usd" SET DATA TYPE numeric(20, 10);--> statement-breakpoint
ALTER TABLE "sessions" ALTER COLUMN "cost_usd" SET DATA TYPE numeric(20, 10);