// sandbox.getHost(port): an HTTP server started inside a sandbox, reached
// through sbx's port (Host PORT-ID.DOMAIN), by its tenant or a holder of
// its traffic token only.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'
import { tracker, until, API, KEY, DOMAIN } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())

// fetch() cannot set Host: a plain request to the daemon with that Host.
function get(host, headers = {}) {
  const u = new URL(API)
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: '/hello.txt', method: 'GET',
      headers: { Host: host, ...headers } }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('getHost reaches a server started in the sandbox', async () => {
  const sbx = await t.create({ timeoutMs: 300_000 })
  await sbx.files.write('/home/user/site/hello.txt', 'hello from inside')
  await sbx.commands.run('/usr/bin/python3 -m http.server 8000 --bind 127.0.0.1', {
    background: true, cwd: '/home/user/site', timeoutMs: 0,
  })
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${DOMAIN}`)
  const info = await Sandbox.connect(sbx.sandboxId)
  const token = info.trafficAccessToken
  assert.ok(token, 'create/connect hands out a traffic token')
  const r = await until(async () => {
    const x = await get(host, { 'E2b-Traffic-Access-Token': token })
    return x.status === 200 ? x : null
  }, 'the server to listen')
  assert.equal(r.body, 'hello from inside')
  assert.equal((await get(host, { 'X-API-Key': KEY })).status, 200)
  assert.equal((await get(host)).status, 401)
  assert.equal((await get(host, { 'E2b-Traffic-Access-Token': 'x'.repeat(40) })).status, 401)
  assert.equal((await get(`8001-${sbx.sandboxId}.${DOMAIN}`, { 'X-API-Key': KEY })).status, 502)
})

test('allowPublicTraffic: true opens the ports to anyone, never the code plane; false answers 403', async () => {
  const pub = await t.create({ timeoutMs: 300_000, network: { allowPublicTraffic: true } })
  await pub.files.write('/home/user/site/hello.txt', 'public')
  await pub.commands.run('/usr/bin/python3 -m http.server 8000 --bind 127.0.0.1', {
    background: true, cwd: '/home/user/site', timeoutMs: 0,
  })
  const r = await until(async () => {
    const x = await get(pub.getHost(8000))
    return x.status === 200 ? x : null
  }, 'the public server to answer without a token')
  assert.equal(r.body, 'public')
  assert.equal((await Sandbox.getInfo(pub.sandboxId)).network?.allowPublicTraffic, true)
  // the code interpreter and envd still need the sandbox's access token
  assert.equal((await get(`49999-${pub.sandboxId}.${DOMAIN}`)).status, 401)
  assert.equal((await get(`49983-${pub.sandboxId}.${DOMAIN}`)).status, 501) // no such envd route, and no port

  const priv = await t.create({ timeoutMs: 300_000, network: { allowPublicTraffic: false } })
  assert.equal((await get(priv.getHost(8000))).status, 403)
  assert.equal((await Sandbox.getInfo(priv.sandboxId)).network?.allowPublicTraffic, false)
  const info = await Sandbox.connect(priv.sandboxId)
  assert.notEqual((await get(priv.getHost(8000), { 'E2b-Traffic-Access-Token': info.trafficAccessToken })).status, 403)
  await assert.rejects(t.create({ network: { allowPublicTraffic: 'yes' } }), /allowPublicTraffic must be a boolean/)
})
