// The code interpreter through @e2b/code-interpreter, unchanged (bench/code.py
// runs it; E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set).
//   node bench_code.mjs first N    time to the first result on a new sandbox
//   node bench_code.mjs rest N     new contexts, forks (sbx's route on the
//                                  E2B plane), N round trips of `1+1`
import { Sandbox } from '@e2b/code-interpreter'

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))]
  return { median: +q(0.5).toFixed(2), p99: +q(0.99).toFixed(2), n: s.length }
}

const mode = process.argv[2]
if (mode === 'first') {
  // A client that has created and run before (a fresh Node process pays
  // ~0.3 s compiling the SDK's paths on its first create and run), then
  // each round on a sandbox from a refilled pool.
  const rounds = Number(process.argv[3] || 10)
  const pooled = async () => {
    for (;;) {
      const r = await fetch(new URL('/v1/info', process.env.E2B_API_URL),
        { headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` } })
      if ((await r.json()).pool >= 2) return
      await new Promise((res) => setTimeout(res, 50))
    }
  }
  const w = await Sandbox.create({ timeoutMs: 120_000 })
  await w.runCode('1')
  await w.kill()
  const first = []
  for (let i = 0; i < rounds; i++) {
    await pooled()
    await new Promise((res) => setTimeout(res, 500))
    const t0 = performance.now()
    const sbx = await Sandbox.create({ timeoutMs: 120_000 })
    const e = await sbx.runCode('1+1')
    first.push(performance.now() - t0)
    if (e.text !== '2') throw new Error(`unexpected ${e.text}`)
    await sbx.kill()
  }
  console.log(JSON.stringify({ first }))
} else {
  const N = Number(process.argv[3] || 300)
  const sbx = await Sandbox.create({ timeoutMs: 600_000 })
  const token = sbx.envdAccessToken ?? (await Sandbox.connect(sbx.sandboxId)).envdAccessToken
  const warm = []
  const pause = () => new Promise((r) => setTimeout(r, 300)) // see bench/code.py
  for (let i = 0; i < 20; i++) {
    await pause()
    const t0 = performance.now()
    const c = await sbx.createCodeContext()
    warm.push(performance.now() - t0)
    await sbx.removeCodeContext(c)
  }
  const parent = await sbx.createCodeContext()
  await sbx.runCode('import numpy as np, pandas as pd\narr = np.arange(1_000_000)', { context: parent })
  const fork = []
  for (let i = 0; i < 20; i++) {
    await pause()
    const t0 = performance.now()
    const r = await fetch(new URL(`/contexts/${parent.id}/fork`, process.env.E2B_SANDBOX_URL), {
      method: 'POST',
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'X-Access-Token': token },
    })
    const c = await r.json()
    fork.push(performance.now() - t0)
    await sbx.removeCodeContext(c.id)
  }
  for (let i = 0; i < 10; i++) await sbx.runCode('1+1', { context: parent })
  const trip = []
  for (let i = 0; i < N; i++) {
    const t0 = performance.now()
    await sbx.runCode('1+1', { context: parent })
    trip.push(performance.now() - t0)
  }
  await sbx.kill()
  console.log(JSON.stringify({ new_context_warm: stats(warm), fork: stats(fork), round_trip_1plus1: stats(trip) }))
}
