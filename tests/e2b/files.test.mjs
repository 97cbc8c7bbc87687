// filesystem.Filesystem and /files through the SDK.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, FileType, InvalidArgumentError, NotFoundError } from 'e2b'
import { tracker } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())
const sbxP = t.create({ timeoutMs: 600_000 })

test('text and binary files round trip, also as root', async () => {
  const sbx = await sbxP
  await sbx.files.write('/tmp/t.txt', 'héllo\n')
  assert.equal(await sbx.files.read('/tmp/t.txt'), 'héllo\n')
  const bytes = new Uint8Array(70000).map((_, i) => (i * 7) & 0xff)
  await sbx.files.write('/home/user/bin.dat', bytes.buffer)
  const back = new Uint8Array(await sbx.files.read('/home/user/bin.dat', { format: 'bytes' }))
  assert.deepEqual(back, bytes)
  const r = await sbx.commands.run('sha256sum /home/user/bin.dat; stat -c %U /home/user/bin.dat')
  assert.match(r.stdout, /user\n$/)
  // As root: the file is root's; a root-only directory is closed to user.
  await sbx.commands.run('mkdir -m 700 /tmp/rootonly', { user: 'root' })
  await sbx.files.write('/tmp/rootonly/secret.txt', 'r', { user: 'root' })
  assert.equal(await sbx.files.read('/tmp/rootonly/secret.txt', { user: 'root' }), 'r')
  assert.equal((await sbx.commands.run('stat -c %U /tmp/rootonly/secret.txt', { user: 'root' })).stdout, 'root\n')
  await assert.rejects(sbx.files.read('/tmp/rootonly/secret.txt'))
  await assert.rejects(sbx.files.write('/tmp/rootonly/x', 'x'))
  // Outside the writable disk even root cannot write.
  await assert.rejects(sbx.files.write('/usr/bin/evil', 'x', { user: 'root' }))
  assert.equal(await sbx.files.read('/tmp/empty-later.txt').catch((e) => e.constructor.name), 'FileNotFoundError')
  await sbx.files.write('/tmp/empty.txt', '')
  assert.equal(await sbx.files.read('/tmp/empty.txt'), '')
})

test('relative paths are under the home directory; parents are created', async () => {
  const sbx = await sbxP
  await sbx.files.write('rel/dir/f.txt', 'x')
  assert.equal((await sbx.commands.run('cat /home/user/rel/dir/f.txt')).stdout, 'x')
})

test('several files in one write', async () => {
  const sbx = await sbxP
  const info = await sbx.files.write([
    { path: '/tmp/m1', data: 'one' },
    { path: 'm2', data: 'two' },
  ])
  assert.deepEqual(info.map((i) => i.path).sort(), ['/home/user/m2', '/tmp/m1'])
  assert.equal(await sbx.files.read('/tmp/m1'), 'one')
  assert.equal(await sbx.files.read('/home/user/m2'), 'two')
})

test('makeDir, list with depth, getInfo, exists, rename, remove', async () => {
  const sbx = await sbxP
  assert.equal(await sbx.files.makeDir('/tmp/d/e'), true)
  assert.equal(await sbx.files.makeDir('/tmp/d/e'), false)
  await sbx.files.write('/tmp/d/e/f.txt', '12345')
  await sbx.files.write('/tmp/d/top.txt', 'x')
  const one = await sbx.files.list('/tmp/d')
  assert.deepEqual(one.map((e) => e.name).sort(), ['e', 'top.txt'])
  assert.equal(one.find((e) => e.name === 'e').type, FileType.DIR)
  // depth-first in name order, as envd's WalkDir: a directory's entries
  // right after it ('e', 'e/f.txt', then 'e-1', whose '-' sorts before '/')
  await sbx.files.makeDir('/tmp/d/e-1')
  await sbx.files.write('/tmp/d/e-1/z.txt', 'z')
  const deep = await sbx.files.list('/tmp/d', { depth: 2 })
  assert.deepEqual(deep.map((e) => e.path), ['/tmp/d/e', '/tmp/d/e/f.txt', '/tmp/d/e-1',
    '/tmp/d/e-1/z.txt', '/tmp/d/top.txt'])
  await sbx.files.remove('/tmp/d/e-1')
  const info = await sbx.files.getInfo('/tmp/d/e/f.txt')
  assert.equal(info.size, 5)
  assert.equal(info.type, FileType.FILE)
  assert.equal(info.owner, 'user')
  assert.equal(info.permissions, '-rw-r--r--')
  assert.equal(await sbx.files.exists('/tmp/d/e/f.txt'), true)
  assert.equal(await sbx.files.exists('/tmp/d/nope'), false)
  const moved = await sbx.files.rename('/tmp/d/e/f.txt', '/tmp/d/g.txt')
  assert.equal(moved.path, '/tmp/d/g.txt')
  assert.equal(await sbx.files.read('/tmp/d/g.txt'), '12345')
  await sbx.files.remove('/tmp/d')
  assert.equal(await sbx.files.exists('/tmp/d'), false)
  // Removing what is not there succeeds, as envd's os.RemoveAll does.
  await sbx.files.remove('/tmp/d')
  await sbx.files.remove('/tmp/no/such/dir/file')
  await assert.rejects(sbx.files.list('/tmp/nope'), NotFoundError)
})

test('symlinkTarget is the absolute path, as envd gives it', async () => {
  const sbx = await sbxP
  const r = await sbx.commands.run('mkdir -p /tmp/ln/sub && cd /tmp/ln && touch t.txt && '
    + 'ln -s t.txt rel && ln -s ../t.txt sub/up && ln -s /tmp/ln/./sub/../t.txt abs && '
    + 'ln -s ../../../../../../etc/passwd far && ln -s missing dangling')
  assert.equal(r.exitCode, 0)
  const target = async (p) => (await sbx.files.getInfo(p)).symlinkTarget
  assert.equal(await target('/tmp/ln/rel'), '/tmp/ln/t.txt')
  assert.equal(await target('/tmp/ln/sub/up'), '/tmp/ln/t.txt')
  assert.equal(await target('/tmp/ln/abs'), '/tmp/ln/t.txt')
  // `..` stops at the sandbox's root; a dangling link still names its target
  assert.equal(await target('/tmp/ln/far'), '/etc/passwd')
  assert.equal(await target('/tmp/ln/dangling'), '/tmp/ln/missing')
  const listed = await sbx.files.list('/tmp/ln')
  assert.equal(listed.find((e) => e.name === 'rel').symlinkTarget, '/tmp/ln/t.txt')
  await sbx.files.remove('/tmp/ln')
})

test('gzip uploads (the SDK\'s gzip option) inflate into the file', async () => {
  const sbx = await sbxP
  const text = 'compressible '.repeat(50000)
  await sbx.files.write('/tmp/gz.txt', text, { gzip: true })
  assert.equal(await sbx.files.read('/tmp/gz.txt', { gzip: true }), text)
  assert.equal(await sbx.files.read('/tmp/gz.txt'), text)
  assert.equal((await sbx.files.getInfo('/tmp/gz.txt')).size, text.length)
  await sbx.files.remove('/tmp/gz.txt')
})

test('a refused upload is answered after its body: a status, not a broken pipe', async () => {
  const sbx = await sbxP
  // metadata over sbx's bounds (33 keys: the SDK checks only the bytes) is
  // refused; a large multipart body must still get the 400 as an
  // InvalidArgumentError, never `fetch failed`
  const big = 'x'.repeat(4 << 20)
  const tooMany = Object.fromEntries(Array.from({ length: 33 }, (_, i) => ['k' + i, 'v']))
  for (const data of ['small', big]) {
    await assert.rejects(sbx.files.write('/tmp/meta.txt', data, { metadata: tooMany }),
      (e) => e instanceof InvalidArgumentError && /at most 32 metadata keys/.test(e.message),
      'an InvalidArgumentError')
    await assert.rejects(sbx.files.write([{ path: '/tmp/meta2.txt', data }], { metadata: tooMany }),
      (e) => e instanceof InvalidArgumentError, 'an InvalidArgumentError for writeFiles')
  }
  assert.equal(await sbx.files.exists('/tmp/meta.txt'), false)
  assert.equal(await sbx.files.exists('/tmp/meta2.txt'), false)
  // and the connection is good for the next request
  await sbx.files.write('/tmp/after.txt', 'ok')
  assert.equal(await sbx.files.read('/tmp/after.txt'), 'ok')
})

test('paths cannot leave the sandbox', async () => {
  const sbx = await sbxP
  await sbx.commands.run('ln -s / /tmp/rootlink; ln -s /proc/1/root /tmp/p1')
  // /etc/shadow of the host does not exist inside; the sandbox's /etc is its own.
  await assert.rejects(sbx.files.read('/tmp/rootlink/etc/shadow'))
  await assert.rejects(sbx.files.read('/../../../../etc/shadow'))
  const hosts = await sbx.files.read('/../../etc/hostname').catch(() => null)
  assert.notEqual(hosts, (await import('node:fs')).readFileSync('/etc/hostname', 'utf8'))
  await assert.rejects(sbx.files.write('/proc/1/environ', 'x'))
  await assert.rejects(sbx.files.read('/tmp/p1/etc/passwd'))
})

test('signed upload and download URLs work without the token header', async () => {
  const sbx = await sbxP
  await sbx.files.write('/tmp/signed.txt', 'signed content')
  const url = await sbx.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: 60_000 })
  const res = await fetch(url, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } })
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'signed content')
  const bad = new URL(url)
  bad.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  const denied = await fetch(bad, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } })
  assert.equal(denied.status, 401)
  assert.match((await denied.json()).message, /unauthorized access/)
  // A signature of the sandbox's whose time is past: E2B's own message. A
  // forged one with a past time is not told apart from any forged one.
  const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
  const old = await sbx.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: -10_000 })
  const expired = await fetch(old, { headers })
  assert.equal(expired.status, 401)
  assert.deepEqual(await expired.json(),
    { code: 401, error: 'unauthorized', message: 'signature is already expired' })
  const forgedOld = new URL(old)
  forgedOld.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  assert.match((await (await fetch(forgedOld, { headers })).json()).message, /unauthorized access/)
  const upOld = await sbx.uploadUrl('/tmp/late.txt', { useSignatureExpiration: -100_000 })
  const form = new FormData()
  form.append('file', 'late')
  const late = await fetch(upOld, { method: 'POST', body: form, headers })
  assert.equal(late.status, 401)
  assert.equal((await late.json()).message, 'signature is already expired')
  assert.equal(await sbx.files.exists('/tmp/late.txt'), false)
})
