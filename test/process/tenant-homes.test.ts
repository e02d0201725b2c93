import { randomUUID } from "node:crypto";
import {
  chmodSync,
  chownSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { resolveAgentUser } from "../../src/process/agent-user.js";
import { TenantHomes } from "../../src/process/tenant-homes.js";
import { getKey, insertKey } from "../../src/store/keys.js";
import { AGENT_USER, ensureAgentUser, isRoot, TENANT_UID_BASE } from "../support/agent-user.js";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";

// Each tenant's HOME is its own user's: made so, and, where an earlier version left it root's
// with the files the shared agent user's, handed over once, without root following anything the
// agent left there or giving it anything it did not make. Needs root.

const GID_BASE = 2_000_000_000;

describe.skipIf(!isRoot).each(BACKENDS)("the tenants' homes on %s", (backend) => {
  let database: TestDatabase;
  let dir: string;
  let homes: TenantHomes;
  let agent: { uid: number; gid: number };
  const logged: string[] = [];

  beforeAll(async () => {
    agent = ensureAgentUser();
    database = await openTestDatabase(backend);
    dir = mkdtempSync(join(tmpdir(), "tenant-homes-"));
    chmodSync(dir, 0o711);
    homes = new TenantHomes(
      (keyId) => getKey(database.db, keyId).then((key) => key?.tenantNumber),
      resolveAgentUser(AGENT_USER),
      {
        homesDir: join(dir, "homes"),
        uidBase: TENANT_UID_BASE,
        gidBase: GID_BASE,
        maxTenants: 1_000_000,
      },
      { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      createLogger("info", {}, (line) => logged.push(line)),
    );
  });
  afterAll(async () => {
    await database?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const newKey = () =>
    insertKey(database.db, { name: "t", admin: false, hash: randomUUID(), prefix: "p" });

  it("gives each key a uid and gid of its own, the same for each of its sessions, and a HOME of that uid's, 0700", async () => {
    const [a, b] = [await newKey(), await newKey()];
    const first = await homes.identityFor(a.id);
    const again = await homes.identityFor(a.id);
    const other = await homes.identityFor(b.id);
    expect(first.runAs).toEqual({
      uid: TENANT_UID_BASE + a.tenantNumber,
      gid: GID_BASE + a.tenantNumber,
      groups: [agent.gid],
    });
    expect(again.runAs).toEqual(first.runAs);
    expect(other.runAs.uid).toBe(TENANT_UID_BASE + b.tenantNumber);
    const home = lstatSync(first.env.HOME ?? "");
    expect({ uid: home.uid, gid: home.gid, mode: home.mode & 0o7777 }).toEqual({
      uid: first.runAs.uid,
      gid: first.runAs.gid,
      mode: 0o700,
    });
    // Its TMPDIR made by the tenant, for the tenant alone.
    const tmp = lstatSync(first.env.TMPDIR ?? "");
    expect({ uid: tmp.uid, mode: tmp.mode & 0o7777 }).toEqual({
      uid: first.runAs.uid,
      mode: 0o700,
    });
  });

  it("hands a HOME of the shared agent user's over to the tenant's uid, and nothing else", async () => {
    const key = await newKey();
    const uid = TENANT_UID_BASE + key.tenantNumber;
    const gid = GID_BASE + key.tenantNumber;
    // As the shared agent user's days left it: root's, the tenant's group, 2770; inside, what the
    // agent made (its user, the tenant's group), and what it planted: a symbolic link to a root
    // file, a hard link to another (made as root: protected_hardlinks keeps the agent from it),
    // and a file of the agent user's own group.
    const home = join(dir, "homes", key.id);
    mkdirSync(join(home, ".claude", "projects"), { recursive: true });
    chownSync(home, 0, gid);
    chmodSync(home, 0o2770);
    const made = [join(home, ".claude"), join(home, ".claude", "projects")];
    const transcript = join(home, ".claude", "projects", "s.jsonl");
    writeFileSync(transcript, "{}\n", { mode: 0o600 });
    made.push(transcript);
    for (const path of made) chownSync(path, agent.uid, gid);
    const rootFile = join(dir, "root-secret");
    writeFileSync(rootFile, "ROOT\n", { mode: 0o600 });
    const rootLinked = join(dir, "root-linked");
    writeFileSync(rootLinked, "ROOT\n", { mode: 0o600 });
    symlinkSync(rootFile, join(home, "symlink"));
    lchownSync(join(home, "symlink"), agent.uid, gid);
    linkSync(rootLinked, join(home, "hardlink"));
    const otherGroup = join(home, "other-group");
    writeFileSync(otherGroup, "x", { mode: 0o600 });
    chownSync(otherGroup, agent.uid, agent.gid);

    const identity = await homes.identityFor(key.id);
    expect(identity.runAs.uid).toBe(uid);

    const owner = (path: string) => {
      const s = lstatSync(path);
      return { uid: s.uid, gid: s.gid };
    };
    expect({ ...owner(home), mode: lstatSync(home).mode & 0o7777 }).toEqual({
      uid,
      gid,
      mode: 0o700,
    });
    for (const path of made) expect(owner(path), path).toEqual({ uid, gid });
    // The symbolic link itself is the tenant's now; the links' targets are root's as they were.
    expect(owner(join(home, "symlink"))).toEqual({ uid, gid });
    expect(owner(rootFile)).toEqual({ uid: 0, gid: 0 });
    expect(owner(rootLinked)).toEqual({ uid: 0, gid: 0 });
    expect(readFileSync(rootFile, "utf8")).toBe("ROOT\n");
    expect(owner(otherGroup)).toEqual({ uid: agent.uid, gid: agent.gid });
    expect(
      logged.filter(
        (line) => line.includes("gave a HOME of the shared agent user's") && line.includes(home),
      ),
    ).toHaveLength(1);
    // Its git told to trust the shared work dirs.
    expect(readFileSync(join(home, ".gitconfig"), "utf8")).toMatch(/directory = \*/);
  });
});
