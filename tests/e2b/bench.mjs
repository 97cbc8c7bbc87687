// Round trip of sandbox.commands.run('true') through the official SDK,
// side by side with the same command through sbx's native API and a bare
// Connect call (what the SDK adds over the wire), in one run.
//   node tests/e2b/bench.mjs [N]      (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
import { Sandbox } from 'e2b'
import { execFileSync } from 'node:child_process'

const N = Number(process.argv[2] || 200)
const API = process.env.E2B_API_URL
const KEY = process.env.E2B_API_KEY

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))]
  return { median: +q(0.5).toFixed(2), p99: +q(0.99).toFixed(2) }
}

async function timeit(fn) {
  for (let i = 0; i < 10; i++) await fn() // warm: connections, pools
  const ms = []
  for (let i = 0; i < N; i++) {
    const t0 = performance.now()
    await fn()
    ms.push(performance.now() - t0)
  }
  return stats(ms)
}

const sbx = await Sandbox.create({ timeoutMs: 600_000 })
const envdHeaders = {
  'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
  'X-Access-Token': sbx.envdAccessToken ?? (await Sandbox.connect(sbx.sandboxId)).envdAccessToken,
}
const startBody = (() => {
  const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/true' }, stdin: false }))
  const b = Buffer.alloc(5 + msg.length)
  b.writeUInt32BE(msg.length, 1)
  msg.copy(b, 5)
  return b
})()

const sdk = await timeit(() => sbx.commands.run('true'))
const sdkBare = await timeit(async () => {
  const h = await sbx.commands.run('/bin/true', { background: true })
  await h.wait()
})
const connect = await timeit(async () => {
  const r = await fetch(new URL('/process.Process/Start', API), {
    method: 'POST', body: startBody,
    headers: { ...envdHeaders, 'Content-Type': 'application/connect+json' },
  })
  await r.arrayBuffer()
})
const native = await timeit(async () => {
  const r = await fetch(new URL(`/v1/sandboxes/${sbx.sandboxId}/exec`, API), {
    method: 'POST', body: JSON.stringify({ argv: ['/bin/true'] }),
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
  })
  await r.arrayBuffer()
})
// The peer: a fresh bubblewrap sandbox per command (no daemon, no HTTP),
// the same login shell.
const bwrapArgs = ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin',
  '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--ro-bind', '/etc', '/etc',
  '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--unshare-all', '--die-with-parent',
  '/bin/bash', '-l', '-c', 'true']
const bwrap = await timeit(async () => execFileSync('/usr/bin/bwrap', bwrapArgs))
await sbx.kill()
console.log(JSON.stringify({
  bwrap_new_sandbox_bash_login: bwrap,
  n: N,
  sdk_commands_run_true_bash_login: sdk,
  sdk_background_run_bin_true: sdkBare,
  connect_start_bin_true_fetch: connect,
  native_exec_bin_true_fetch: native,
}, null, 1))
