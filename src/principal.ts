/**
 * Who is calling: the key's id and whether it is an admin. With auth off the caller is an
 * anonymous admin (`keyId` null), which is only allowed on a loopback address.
 */
export interface Principal {
  keyId: string | null;
  name: string;
  admin: boolean;
}

export const ANONYMOUS_ADMIN: Principal = { keyId: null, name: "anonymous", admin: true };
