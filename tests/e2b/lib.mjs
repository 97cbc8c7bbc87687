// Shared by the E2B SDK scenarios: the SDK reads E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY from the environment (run.py sets them to
// a private sbx daemon), exactly as a user's agent code would.
import assert from 'node:assert/strict'

export const API = process.env.E2B_API_URL
export const KEY = process.env.E2B_API_KEY
export const DOMAIN = process.env.SBX_E2B_DOMAIN

// Every sandbox a test makes is killed afterwards, whatever happened.
export function tracker(Sandbox) {
  const made = []
  return {
    async create(...args) {
      const sbx = await Sandbox.create(...args)
      made.push(sbx)
      return sbx
    },
    async cleanup() {
      for (const s of made) await s.kill().catch(() => {})
    },
  }
}

// Poll fn until it returns a truthy value (no fixed sleeps).
export async function until(fn, what, ms = 20000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

// A raw HTTP request to the daemon's port (for what the SDK does not
// expose: Host-routed preview URLs, hostile input).
export async function raw(path, { method = 'GET', headers = {}, body } = {}) {
  const res = await fetch(new URL(path, API), { method, headers, body })
  const text = await res.text()
  return { status: res.status, headers: res.headers, text }
}
