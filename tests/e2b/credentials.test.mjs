// Credentials through the SDK: network.rules with a header transform whose
// value names an sbx secret (`${secret:NAME}`, created with the native API
// and the same key): the header reaches the upstream with the secret, the
// sandbox never holds it, updateNetwork replaces the rules, bad rules are
// refused (docs/e2b.md, docs/egress.md).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import http from 'node:http'
import { Sandbox } from 'e2b'
import { tracker, API, KEY } from './lib.mjs'

const t = tracker(Sandbox)
const SECRET = 'e2b-sdk-' + crypto.randomBytes(12).toString('hex')
const sha = (s) => crypto.createHash('sha256').update(s).digest('hex')
const seen = []
// Answers a digest of the Authorization it got: an echo would put the
// secret into the sandbox.
const server = http.createServer((req, res) => {
  seen.push(req.headers)
  res.end(sha(req.headers.authorization || ''))
})
await new Promise((r) => server.listen(0, '127.0.0.1', r))
const port = server.address().port
after(async () => {
  await t.cleanup()
  server.close()
})

const rules = {
  localhost: [{ transform: { headers: { Authorization: 'Bearer ${secret:E2B_SDK_KEY}' } } }],
}
// NO_PROXY names localhost: the upstream is the host's, through the proxy.
const get = (sbx) =>
  sbx.commands.run(`curl -sS http://localhost:${port}/x`, { envs: { NO_PROXY: '', no_proxy: '' } })

test('network.rules put a secret into requests to the ruled host', async () => {
  const r = await fetch(new URL('/v1/secrets', API), {
    method: 'POST',
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'E2B_SDK_KEY', value: SECRET }),
  })
  assert.equal(r.status, 201, await r.text())
  const sbx = await t.create('base', {
    network: { allowOut: ['localhost'], denyOut: ['0.0.0.0/0'], rules },
  })
  assert.equal((await get(sbx)).stdout, sha('Bearer ' + SECRET))
  assert.equal(seen.at(-1).authorization, 'Bearer ' + SECRET)
  const env = await sbx.commands.run(
    "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rl sk- /tmp /home 2>/dev/null; true",
    { user: 'root' }
  )
  assert.ok(!env.stdout.includes(SECRET))
  // Omitting rules clears them: the next request goes without.
  await sbx.updateNetwork({ allowOut: ['localhost'], denyOut: ['0.0.0.0/0'] })
  assert.equal((await get(sbx)).stdout, sha(''))
})

test('bad rules are refused', async () => {
  await assert.rejects(
    Sandbox.create('base', {
      network: {
        allowOut: ['localhost'],
        denyOut: ['0.0.0.0/0'],
        rules: { localhost: [{ transform: { headers: { A: '${secret:NO_SUCH}' } } }] },
      },
    }),
    (e) => /secret `NO_SUCH` does not exist/.test(e.message)
  )
})
