// git-handoff opencode plugin: written by `git handoff hooks install --agent opencode`, removed by
// `git handoff hooks uninstall --agent opencode` (install rewrites it: keep your own plugins in files of
// their own). It hands OpenCode's moments to `git handoff hook opencode-…`, the one event core every
// agent CLI's hooks share, and does what the answer ({"context"|"block"|"warning": text}) says:
//   opencode-session-start  the first model request of a session: the context joins its system prompt
//   opencode-stop           a reply that ends the turn (text, no tool call): a block is sent back as
//                           the next user message, and the turn goes on
//   opencode-compacting     before OpenCode compacts a session: the handoff document is written now
// OpenCode keeps its sessions in a database: the plugin writes what each of its model answers used
// (the assistant message's `tokens` and `cost`) to a transcript of its own, one per session, under the
// repository's .git/handoff/opencode/, and names it in every payload (`transcript_path`).
// See docs/agent-clis.md ("OpenCode").
import { spawn, spawnSync } from "node:child_process"
import { appendFileSync, mkdirSync } from "node:fs"
import { join } from "node:path"

function hook(name, payload, cwd) {
  return new Promise((resolve) => {
    let out = ""
    let err = ""
    let child
    try {
      child = spawn("git", ["handoff", "hook", name], { cwd, stdio: ["pipe", "pipe", "pipe"] })
    } catch {
      resolve({})
      return
    }
    child.stdout.on("data", (chunk) => (out += chunk))
    child.stderr.on("data", (chunk) => (err += chunk))
    child.on("error", () => resolve({}))
    child.on("close", () => {
      if (err.trim()) process.stderr.write(err.trim() + "\n")
      let answer = {}
      try {
        answer = out.trim() ? JSON.parse(out) : {}
      } catch {}
      if (answer && typeof answer.warning === "string" && answer.warning) process.stderr.write(answer.warning + "\n")
      resolve(answer && typeof answer === "object" ? answer : {})
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

function usageDir(directory) {
  try {
    const found = spawnSync("git", ["rev-parse", "--absolute-git-dir"], { cwd: directory, encoding: "utf8" })
    const gitDir = found.status === 0 ? found.stdout.trim() : ""
    return gitDir ? join(gitDir, "handoff", "opencode") : ""
  } catch {
    return ""
  }
}

export const GitHandoff = async ({ client, directory }) => {
  const loaded = Date.now()
  const sessions = new Map() // session id -> Promise<{ context, child }>
  const continuing = new Set() // sessions whose last stop was blocked: the model goes on because of it
  const dir = usageDir(directory)
  const roots = new Map() // session id -> the session whose transcript holds its use (a subagent's: its parent's)
  const written = new Map() // assistant message id -> what was last written of it

  const transcript = (sessionID) => (dir && /^[A-Za-z0-9_-]+$/.test(sessionID) ? join(dir, `${sessionID}.jsonl`) : "")
  const payload = (sessionID, event, more) => ({
    session_id: sessionID, cwd: directory, hook_event_name: event, transcript_path: transcript(sessionID), ...more,
  })
  const rootOf = async (sessionID) => {
    if (!roots.has(sessionID)) {
      const info = (await client.session.get({ path: { id: sessionID } }).catch(() => undefined))?.data
      roots.set(sessionID, info?.parentID || sessionID)
    }
    return roots.get(sessionID)
  }
  const record = async (info) => {
    if (!dir || info?.role !== "assistant" || !info.tokens || typeof info.id !== "string") return
    if (!info.tokens.input && !info.tokens.output && !info.tokens.cache?.read && !info.cost) return // not answered yet
    const line = JSON.stringify({ type: "assistant", id: info.id, session: info.sessionID, tokens: info.tokens,
                                  cost: info.cost })
    if (written.get(info.id) === line) return
    const path = transcript(await rootOf(info.sessionID))
    if (!path) return
    try {
      mkdirSync(dir, { recursive: true })
      appendFileSync(path, line + "\n")
      written.set(info.id, line)
    } catch {}
  }

  const started = (sessionID) => {
    if (!sessions.has(sessionID)) {
      sessions.set(sessionID, (async () => {
        const info = (await client.session.get({ path: { id: sessionID } }).catch(() => undefined))?.data
        if (info?.parentID) return { context: "", child: true } // a subagent's session
        const source = (info?.time?.created ?? loaded) >= loaded ? "startup" : "resume"
        const answer = await hook("opencode-session-start", payload(sessionID, "session.start", { source }), directory)
        return { context: typeof answer.context === "string" ? answer.context : "", child: false }
      })())
    }
    return sessions.get(sessionID)
  }

  return {
    event: async ({ event }) => {
      if (event?.type === "message.updated") await record(event.properties?.info)
    },
    "experimental.chat.system.transform": async (input, output) => {
      if (!input?.sessionID) return
      const { context } = await started(input.sessionID)
      if (context) output.system.push(context)
    },
    "experimental.text.complete": async (input) => {
      const { child } = await started(input.sessionID)
      if (child) return
      const message = (await client.session
        .message({ path: { id: input.sessionID, messageID: input.messageID } })
        .catch(() => undefined))?.data
      if (!message || message.info?.summary || message.info?.agent === "compaction") return // a compaction's summary
      if ((message.parts ?? []).some((part) => part.type === "tool")) return // the turn goes on: not a stop
      const active = continuing.has(input.sessionID)
      const answer = await hook("opencode-stop", payload(input.sessionID, "stop", { stop_hook_active: active }), directory)
      if (typeof answer.block !== "string" || !answer.block) {
        continuing.delete(input.sessionID)
        return
      }
      continuing.add(input.sessionID)
      // a user message that starts no reply of its own: the running turn sees it and goes on
      await client.session.promptAsync({
        path: { id: input.sessionID },
        body: { noReply: true, parts: [{ type: "text", text: answer.block }] },
      })
    },
    "experimental.session.compacting": async (input) => {
      const { child } = await started(input.sessionID)
      if (child) return
      await hook("opencode-compacting", payload(input.sessionID, "session.compacting", { trigger: "auto" }), directory)
    },
  }
}
