import { z } from "@hono/zod-openapi";
import { MAX_IMAGES } from "../../../agents/images.js";
import { ModelName, PermissionMode } from "../../../session-settings.js";
import { ImageAttachment } from "../runs/runs.schemas.js";

export { ControlEvent, UserInputEvent } from "../../../events.js";

export const RunInputBody = z
  .strictObject({
    text: z.string().min(1, { error: "expected the input's text" }).openapi({
      description:
        "What the user says to the agent now: written to it as the user's next message, which it answers after the turn in progress, in this run.",
    }),
    attachments: z
      .array(ImageAttachment)
      .max(MAX_IMAGES, { error: `at most ${MAX_IMAGES} attachments` })
      .optional()
      .openapi({ description: "Images with the text, as a message's `attachments`." }),
  })
  .openapi("RunInput");

export const RunControlBody = z
  .strictObject({
    model: ModelName.optional().openapi({
      description: "The model the agent calls from its next API request on.",
    }),
    permission_mode: PermissionMode.optional().openapi({
      description:
        "How the agent may use tools from now on. A bypass mode needs the key's policy to allow it, and a run started in a bypass mode (the agent refuses it otherwise: 409 `control_failed`).",
    }),
  })
  .refine((body) => body.model !== undefined || body.permission_mode !== undefined, {
    error: "expected model or permission_mode",
  })
  .openapi("RunControl");
