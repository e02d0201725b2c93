import { MAX_IMAGE_BASE64_CHARS } from "../../src/agents/images.js";

// Images for the attachment tests: a real one (a 1x1 PNG the CLI and the API can decode), and
// base64 data of any size that starts as a media type does.

/** A valid 1x1 PNG. */
export const PNG_1X1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/** The first bytes of each media type's files. */
export const SIGNATURES = {
  "image/png": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  "image/jpeg": Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  "image/gif": Buffer.from("GIF89a"),
  "image/webp": Buffer.concat([Buffer.from("RIFF"), Buffer.alloc(4), Buffer.from("WEBPVP8 ")]),
} as const;

/** Base64 of `bytes` bytes that start with the media type's signature (the rest zeros). */
export function imageData(mediaType: keyof typeof SIGNATURES, bytes = 64): string {
  const data = Buffer.alloc(bytes);
  SIGNATURES[mediaType].copy(data);
  return data.toString("base64");
}

/** PNG data of exactly the largest size an attachment may have, in base64 characters. */
export const LARGEST_PNG = imageData("image/png", (MAX_IMAGE_BASE64_CHARS / 4) * 3);
