// Images a message carries to the agent (`attachments`), and their bounds. The Messages API takes
// PNG, JPEG, GIF and WebP, each at most 5 MiB of base64 (what claude 2.1.328 checks before it
// sends one); a message takes up to four, so that its body stays far below the API's 32 MB
// request limit with the conversation around it. They are held in memory for the run, never
// stored.

export const IMAGE_MEDIA_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
export type ImageMediaType = (typeof IMAGE_MEDIA_TYPES)[number];

export interface ImageAttachment {
  mediaType: ImageMediaType;
  /** The image's bytes, base64 (standard alphabet, padded). */
  data: string;
}

export const MAX_IMAGES = 4;
export const MAX_IMAGE_BASE64_CHARS = 5 * 1024 * 1024;

/** Each type's first bytes, by offset (WebP: a RIFF container whose form type is WEBP). */
const MAGIC: Record<ImageMediaType, Array<[offset: number, bytes: number[]]>[]> = {
  "image/png": [[[0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]]]],
  "image/jpeg": [[[0, [0xff, 0xd8, 0xff]]]],
  "image/gif": [[[0, [...Buffer.from("GIF87a")]]], [[0, [...Buffer.from("GIF89a")]]]],
  "image/webp": [
    [
      [0, [...Buffer.from("RIFF")]],
      [8, [...Buffer.from("WEBP")]],
    ],
  ],
};

// A single character class and a length check: a regex of 4-character groups overflows V8's
// backtracking stack on megabytes of input.
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;

/** What is wrong with the image, or undefined when it is well-formed base64 of its media type. */
export function imageProblem(image: ImageAttachment): string | undefined {
  if (image.data.length === 0) return "expected the image's bytes, base64";
  if (image.data.length % 4 !== 0 || !BASE64_CHARS.test(image.data)) {
    return "expected base64 (A-Z, a-z, 0-9, '+', '/', padded with '='), without line breaks";
  }
  // Twelve bytes hold every signature; sixteen characters decode to them.
  const head = Buffer.from(image.data.slice(0, 16), "base64");
  const matches = MAGIC[image.mediaType].some((parts) =>
    parts.every(([offset, bytes]) => bytes.every((b, i) => head[offset + i] === b)),
  );
  if (!matches) return `the data is not a ${image.mediaType} image (its first bytes say otherwise)`;
  return undefined;
}

/** The file name extension of an image of the type, for a CLI that takes images as files. */
export function imageExtension(mediaType: ImageMediaType): string {
  return mediaType.slice("image/".length).replace("jpeg", "jpg");
}

/**
 * What a run keeps of its message's images: a name, the media type and the size in bytes, never
 * the bytes themselves; null when there are none. Named as codex gets them as files.
 */
export function storedImages(
  images: readonly ImageAttachment[],
): { name: string; media_type: string; size_bytes: number }[] | null {
  if (images.length === 0) return null;
  return images.map((image, i) => ({
    name: `image-${i + 1}.${imageExtension(image.mediaType)}`,
    media_type: image.mediaType,
    size_bytes: Buffer.byteLength(image.data, "base64"),
  }));
}
