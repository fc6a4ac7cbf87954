--- kernel-lsp for Neovim 0.11+: diagnostics, quick fixes, inlay hints, code lenses, commands and proposed edits for
--- GPU kernel code (Triton, NKI, CUDA).
---
--- ```lua
--- require("kernel_lsp").setup({
---   cmd = nil,            -- how to start the server; default: `kernel-lsp serve` (or `python -m kernel_lsp serve`);
---                         -- vim.lsp.rpc.connect(host, port) for a `kernel-lsp serve --tcp` (then pass `token`)
---   token = nil,          -- the session token of a `kernel-lsp serve --tcp` (docs/editors.md), sent only with initialize
---   python = nil,         -- a Python interpreter that has kernel-lsp installed, e.g. ".venv/bin/python"
---   settings = {},        -- the `kernelLsp` settings (docs/configuration.md), e.g. { ignore = { "TR009" } }
---   inlay_hints = true,   -- show the server's inlay hints (registers, spills, shared memory) in attached buffers
---   codelens = true,      -- show and refresh code lenses (check verdicts, "▶ check against the reference")
---   ir_split = "vertical", -- where :KernelIR opens the IR: "vertical" or "horizontal"
---   mappings = { ... },   -- buffer-local mappings (see M.defaults.mappings); false for none
--- })
--- ```
---
--- The server is registered with `vim.lsp.config("kernel_lsp", ...)` and `vim.lsp.enable("kernel_lsp")`, so
--- anything else about it can be changed the usual way, e.g. `vim.lsp.config("kernel_lsp", { on_attach = ... })`.
local M = {}

M.name = "kernel_lsp"
M.section = "kernelLsp"

local STATUS = "kernel-lsp.status"
local REINDEX = "kernel-lsp.reindex"
local SHOW_IR = "kernel-lsp.showIR"
local COMPARE_IR = "kernel-lsp.compareIR"
local RUN_CHECKS = "kernel-lsp.runChecks"
local REFINE = "kernel-lsp.refine"

--- The server's workspace commands, each with its user command: `name`, `user`, `argument` ("none", "position":
--- {uri, line, character}, or "uri": {uri}), `title`, `description`. Generated from the server's table
--- (kernel_lsp/commands.py) into kernel_lsp/commands.lua, plus the ones this plugin knows ahead of the server.
--- A command the running server does not advertise is still defined: running it says so.
M.server_commands = vim.deepcopy(require("kernel_lsp.commands"))
local AHEAD = {
  { name = "kernel-lsp.profileLines", user = "KernelProfile", argument = "position", title = "Profile lines",
    description = "Where the kernel under the cursor spends its time, per source line." },
  { name = "kernel-lsp.optimizeTiling", user = "KernelOptimize", argument = "position", title = "Optimize tiling",
    description = "A faster tiling for the kernel under the cursor, proposed as an edit to confirm." },
}
for _, extra in ipairs(AHEAD) do
  if not vim.iter(M.server_commands):any(function(c)
    return c.name == extra.name
  end) then
    M.server_commands[#M.server_commands + 1] = extra
  end
end

--- Short names for the commands the plugin handles itself: M.commands.status == "kernel-lsp.status", ...
M.commands = {
  status = STATUS,
  reindex = REINDEX,
  ir = SHOW_IR,
  compare_ir = COMPARE_IR,
  checks = RUN_CHECKS,
  refine = REFINE,
  profile = "kernel-lsp.profileLines",
  optimize = "kernel-lsp.optimizeTiling",
}

M.defaults = {
  cmd = nil,
  python = nil,
  settings = {},
  inlay_hints = true,
  codelens = true,
  ir_split = "vertical",
  -- Buffer-local mappings in buffers kernel-lsp attaches to; a mapping set to false is not made.
  mappings = {
    lens_run = "<localleader>kl", -- run the code lens on the cursor line (:KernelLensRun)
    check = "<localleader>kc", -- :KernelCheck
    ir = "<localleader>ki", -- :KernelIR
    status = "<localleader>ks", -- :KernelStatus
  },
}
M.options = vim.deepcopy(M.defaults)

M.STAGES = { "ttir", "ttgir", "llir", "ptx", "sass", "amdgcn" }
M.TARGETS = { "sm_80", "sm_90", "sm_100", "sm_120", "gfx942", "gfx950" }
local IR_FILETYPES = { ttir = "mlir", ttgir = "mlir", llir = "llvm", ptx = "ptx", sass = "asm", amdgcn = "asm" }

local DIAGNOSTIC_REFRESH = "workspace/diagnostic/refresh"
local CODELENS_REFRESH = "workspace/codeLens/refresh"
local SHOW_DOCUMENT = "window/showDocument"
local APPLY_EDIT = "workspace/applyEdit"
local EXECUTE_COMMAND = "workspace/executeCommand"

local ir_ns = vim.api.nvim_create_namespace("kernel_lsp_ir")
local group = vim.api.nvim_create_augroup("kernel_lsp", { clear = true })

--- JSON null arrives as vim.NIL, which is truthy: treat it as absent.
local function is_null(v)
  return v == nil or v == vim.NIL
end

local function list(v)
  return type(v) == "table" and v or {}
end

local function notify(message, level)
  vim.notify("kernel-lsp: " .. message, level or vim.log.levels.INFO)
end

--- Settings whose value is a JSON object. Lua cannot tell an empty object from an empty list and Neovim
--- encodes `{}` as `[]`, so empty tables are marked as objects before they are sent.
local OBJECT_SETTINGS = { severity = true }

local function json_settings(settings)
  local out = vim.deepcopy(settings or {})
  for key in pairs(OBJECT_SETTINGS) do
    if type(out[key]) == "table" and next(out[key]) == nil then
      out[key] = vim.empty_dict()
    end
  end
  return next(out) == nil and vim.empty_dict() or out
end

--- The server ended with an error: say which command failed and how to have a working one, instead of Neovim's
--- bare "quit with exit code 1" (most often kernel-lsp is not installed for that command).
function M.server_exited(cmd, code, client_id)
  if code == 0 then
    return
  end
  local client = vim.lsp.get_client_by_id(client_id)
  if client and client.initialized then
    return -- it ran and stopped: Neovim's own message and the log say why
  end
  local shown = table.concat(cmd, " ")
  vim.schedule(function()
    vim.notify(("kernel-lsp: the server did not start: `%s` exited with code %d. Install kernel-lsp for that command "
      .. "(`pipx install ./kernel-lsp` puts `kernel-lsp` on PATH; or `python -m pip install ./kernel-lsp` into "
      .. "the Python that `python` names in setup()), or set `cmd` in require(\"kernel_lsp\").setup(). "
      .. "`:checkhealth vim.lsp` and `:LspLog` show more."):format(shown, code), vim.log.levels.ERROR)
  end)
end

local function default_cmd(python)
  if python then
    return { vim.fn.expand(python), "-P", "-m", "kernel_lsp", "serve" }
  end
  if vim.fn.executable("kernel-lsp") == 1 then
    return { "kernel-lsp", "serve" }
  end
  return { vim.fn.executable("python3") == 1 and "python3" or "python", "-P", "-m", "kernel_lsp", "serve" }
end

--- `:KernelReport`: `kernel-lsp report` on the server's root folder, with the command that runs the server, then the
--- page opened in the browser (`vim.ui.open`, or `opts.open(path)`). The report compiles the folder's kernels and,
--- where the server says the workspace is trusted, checks and times them (`--run-checks`: that runs the folder's
--- code); untrusted, it says so and the page has no verdicts. It runs in the background; a message says where the
--- page is or why it failed.
function M.report(opts)
  opts = opts or {}
  local client = vim.lsp.get_clients({ name = M.name })[1]
  if not client or type(client.config.cmd) ~= "table" then
    vim.notify("kernel-lsp: the report needs the running server (and its command)", vim.log.levels.WARN)
    return
  end
  local root = client.root_dir or vim.fn.getcwd()
  local cmd = vim.deepcopy(client.config.cmd)
  if cmd[#cmd] == "serve" then
    table.remove(cmd)
  end
  local file = vim.fs.joinpath(vim.fn.tempname(), "report.html")
  vim.fn.mkdir(vim.fs.dirname(file), "p")
  vim.list_extend(cmd, { "report", root, "-o", file, "--quiet" })
  -- Checks run the folder's code: only where the server (which holds the user's trust) says it is trusted.
  local status = client:request_sync("workspace/executeCommand", { command = M.commands.status, arguments = {} }, 5000)
  local trusted = status and status.result and status.result.trusted == true
  if trusted then
    table.insert(cmd, "--run-checks")
    vim.notify("kernel-lsp: writing the report of " .. root .. " (compiling, checking and timing its kernels)")
  else
    table.insert(cmd, "--no-checks")
    vim.notify("kernel-lsp: writing the report of " .. root .. " without checks or timing: the workspace is not "
      .. "trusted (:KernelTrust)", vim.log.levels.WARN)
  end
  vim.system(cmd, { cwd = root, text = true }, vim.schedule_wrap(function(done)
    if done.code ~= 0 or vim.fn.filereadable(file) == 0 then
      local why = vim.trim(done.stderr or ""):match("([^\n]*)$")
      vim.notify("kernel-lsp: the report failed: " .. (why ~= "" and why or ("exit code " .. done.code)),
        vim.log.levels.ERROR)
      return
    end
    vim.notify("kernel-lsp: report written to " .. file)
    local open = opts.open or vim.ui.open
    open(file)
  end))
end

--- Ask the server for every open buffer's diagnostics again. Neovim 0.11 pulls diagnostics only when a buffer
--- is opened or edited; the server also has news after indexing the workspace or a change in another file.
function M.refresh_diagnostics(client)
  for bufnr in pairs(client.attached_buffers) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
      client:request("textDocument/diagnostic", params, vim.lsp.diagnostic.on_diagnostic, bufnr)
    end
  end
end

--- Ask for the code lenses of every buffer the client is attached to (the server's lenses changed: a check
--- started or finished). Requested directly: vim.lsp.codelens.refresh skips a buffer whose previous request is
--- still out, which would leave "checking…" up after a check that finished quickly.
function M.refresh_lenses(client)
  if not M.options.codelens then
    return
  end
  for bufnr in pairs(client.attached_buffers) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
      client:request("textDocument/codeLens", params, vim.lsp.codelens.on_codelens, bufnr)
    end
  end
end

--- The kernel-lsp client of a buffer (default: the current one), else any running kernel-lsp client.
function M.client(bufnr)
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = bufnr or 0 })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  return clients[1]
end

--- The names of the commands the running server offers (its initialize result's executeCommandProvider).
function M.advertised(client)
  local commands = vim.tbl_get(client or {}, "server_capabilities", "executeCommandProvider", "commands")
  return type(commands) == "table" and commands or {}
end

local function spec_of(command)
  for _, c in ipairs(M.server_commands) do
    if c.name == command then
      return c
    end
  end
end

--- Run a server command: `on_result(result, client)` gets its result. A result with an "error" key is shown as
--- a warning and one with a "proposal" key opens the proposal preview instead. A command the server does not
--- offer is reported, not sent.
function M.execute(command, on_result, arguments)
  local client = M.client()
  if not client then
    notify("not running (open a Python or CUDA file in a project first)", vim.log.levels.WARN)
    return
  end
  if not vim.list_contains(M.advertised(client), command) then
    notify(("%s is not offered by this kernel-lsp server (a newer kernel-lsp has it)"):format(command),
      vim.log.levels.WARN)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local params = { command = command, arguments = arguments or {} }
  client:request(EXECUTE_COMMAND, params, function(err, result)
    if err then
      notify(("%s failed: %s"):format(command, err.message or tostring(err)), vim.log.levels.ERROR)
      return
    end
    M.handle_result(command, result, client, bufnr, on_result)
  end, bufnr)
end

--- What every command's result goes through: errors are warnings, proposals open the preview, the rest goes to
--- `on_result` (or a floating window when there is none).
function M.handle_result(command, result, client, bufnr, on_result)
  if type(result) == "table" and not is_null(result.error) then
    local lines = { tostring(result.error) }
    vim.list_extend(lines, M.format_table(result.table)) -- e.g. the configurations a search tried
    notify(table.concat(lines, "\n"), vim.log.levels.WARN)
  elseif type(result) == "table" and not is_null(result.proposal) then
    -- "applyEdit": the server also sent it as a workspace/applyEdit needing confirmation, which the handler
    -- below already put in the preview; showing it twice would offer it twice.
    local shown = M.proposal()
    if result.delivered ~= "applyEdit" or not (shown and shown.title == result.proposal.title) then
      M.preview_proposal(result.proposal, bufnr)
    end
  elseif on_result then
    on_result(result, client)
  else
    M.show_result(command, result)
  end
end

local TEXT_KEYS = { "markdown", "plan", "answer", "text", "message", "summary" }

--- A result no command-specific code knows: its text (a plan, an answer) as markdown, else its fields, in a
--- floating window; a plain value in a message.
function M.show_result(command, result)
  if type(result) ~= "table" then
    if not is_null(result) then
      notify(("%s: %s"):format(command, tostring(result)))
    end
    return
  end
  local spec = spec_of(command)
  local title = type(result.title) == "string" and result.title or (spec and spec.title) or command
  for _, key in ipairs(TEXT_KEYS) do
    if type(result[key]) == "string" then
      local lines = vim.split(result[key], "\n", { plain = true })
      local tbl = M.format_table(result.table)
      if #tbl > 0 then
        lines[#lines + 1] = ""
        vim.list_extend(lines, vim.tbl_map(function(l)
          return "    " .. l
        end, tbl))
      end
      return M.show_float(lines, title, "markdown")
    end
  end
  M.show_float(M.format_status(result), title)
end

--- The arguments of a "position" command at the cursor: one object {uri, line, character} in the client's
--- position encoding.
function M.position_argument(client, extra)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  return vim.tbl_extend("force", {
    uri = params.textDocument.uri,
    line = params.position.line,
    character = params.position.character,
  }, extra or {})
end

local function sorted_keys(t)
  local keys = vim.tbl_keys(t)
  table.sort(keys)
  return keys
end

--- An object as lines: `key: value`, one level of nesting indented.
function M.format_status(status)
  local lines = {}
  for _, key in ipairs(sorted_keys(status)) do
    local value = status[key]
    if type(value) == "table" and not vim.islist(value) then
      lines[#lines + 1] = key .. ":"
      for _, sub in ipairs(sorted_keys(value)) do
        lines[#lines + 1] = ("  %s: %s"):format(sub, vim.inspect(value[sub]))
      end
    elseif type(value) == "table" then
      lines[#lines + 1] = ("%s: %s"):format(key, table.concat(vim.tbl_map(function(v)
        return type(v) == "table" and vim.inspect(v, { newline = " ", indent = "" }) or tostring(v)
      end, value), ", "))
    else
      lines[#lines + 1] = ("%s: %s"):format(key, type(value) == "string" and value or vim.inspect(value))
    end
  end
  return lines
end

function M.show_float(lines, title, syntax)
  return vim.lsp.util.open_floating_preview(lines, syntax or "yaml", {
    border = "rounded",
    title = (" kernel-lsp %s "):format(title or ""),
    focus_id = "kernel_lsp_result",
  })
end

--- `:KernelStatus`: the server's status in a floating window (closed when the cursor moves).
function M.status()
  M.execute(STATUS, function(result)
    vim.lsp.util.open_floating_preview(M.format_status(result or {}), "yaml", {
      border = "rounded",
      title = " kernel-lsp ",
      focus_id = "kernel_lsp_status",
    })
  end)
end

--- `:KernelReindex`: index the workspace from disk again (the server then asks for fresh diagnostics).
function M.reindex()
  M.execute(REINDEX, function(result)
    local n = vim.tbl_get(type(result) == "table" and result or {}, "indexed") or {}
    notify(("indexed %d files, %d Triton and %d NKI kernels"):format(
      n.files or 0, n.tritonKernels or 0, n.nkiKernels or 0))
  end)
end

--- A check report ({verdicts, errors}) as lines, one per verdict and error.
function M.format_checks(result)
  local lines = {}
  for _, v in ipairs(list(result.verdicts)) do
    local mark = v.status == "correct" and "✓" or "✗"
    local took = type(v.durationS) == "number" and (", %.1f s"):format(v.durationS) or ""
    lines[#lines + 1] = ("%s %s: %s [%s%s]"):format(mark, v.kernel or "?", v.message or v.status or "",
      v.device or "?", took)
  end
  for _, e in ipairs(list(result.errors)) do
    local line = type(e.line) == "number" and (" (line %d)"):format(e.line + 1) or ""
    lines[#lines + 1] = ("✗ error%s: %s"):format(line, e.message or "")
  end
  if #lines == 0 then
    lines[1] = "no kernel was checked"
  end
  return lines
end

local function report_checks(result)
  if type(result) ~= "table" then
    return
  end
  local failed = #list(result.errors) > 0 or vim.iter(list(result.verdicts)):any(function(v)
    return v.status ~= "correct"
  end)
  notify(table.concat(M.format_checks(result), "\n"), failed and vim.log.levels.WARN or vim.log.levels.INFO)
end

--- `:KernelCheck`: check the kernel under the cursor against its PyTorch reference; `:KernelCheck!` checks every
--- kernel of the file. Verdicts are reported in a message (and as diagnostics and code lenses by the server).
function M.check(opts)
  local client = M.client()
  if not client then
    return M.execute(RUN_CHECKS)
  end
  local argument = (opts and opts.bang) and { uri = vim.uri_from_bufnr(0) } or M.position_argument(client)
  if vim.list_contains(M.advertised(client), RUN_CHECKS) then
    notify(opts and opts.bang and "checking every kernel of the file…" or "checking the kernel under the cursor…")
  end
  M.execute(RUN_CHECKS, report_checks, { argument })
end

--- Run a server command with the argument its kind asks for, taken from the current window: nothing, the
--- document ({uri}) or the cursor ({uri, line, character}). `extra` adds fields to an object argument.
function M.run(command, extra)
  local client = M.client()
  if not client then
    return M.execute(command)
  end
  local spec = spec_of(command)
  local kind = spec and spec.argument or "none"
  local arguments
  if kind == "none" then
    arguments = {}
  elseif kind == "uri" then
    arguments = { vim.tbl_extend("force", { uri = vim.uri_from_bufnr(0) }, extra or {}) }
  elseif kind == "position" then
    arguments = { M.position_argument(client, extra) }
  else
    notify(("%s takes a %q argument, which this plugin cannot send: update the plugin"):format(command, kind),
      vim.log.levels.WARN)
    return
  end
  M.execute(command, nil, arguments)
end

--- `:KernelRefine [instruction]`: continue the assistant's session for the kernel under the cursor ("go" accepts
--- its plan; other text replaces the plan or asks for a change). Without an instruction, asks for one.
function M.refine(opts)
  local function send(instruction)
    if instruction ~= nil then
      M.run(REFINE, { instruction = instruction })
    end
  end
  if opts and opts.args and opts.args ~= "" then
    send(opts.args)
  else
    vim.ui.input({ prompt = 'kernel-lsp refine ("go" to accept the plan): ' }, send)
  end
end

--- `:KernelLensRun`: run the code lens on the cursor line (e.g. "▶ check against the reference").
function M.run_lens()
  vim.lsp.codelens.run()
end

-- Show IR -------------------------------------------------------------------------------------------------------

local function ir_path(uri)
  local ok, path = pcall(vim.uri_to_fname, uri)
  if ok and type(path) == "string" and path:find("/.kernel-lsp/ir/", 1, true) then
    return path
  end
end

local function buffer_named(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
end

--- A read-only scratch buffer holding an IR file (written by the server under .kernel-lsp/ir/), `lines` (0-based)
--- highlighted; the buffer that holds it already is reused. Nil when the file cannot be read.
local function ir_buffer(path, lines, stage)
  local ok, text = pcall(vim.fn.readfile, path)
  if not ok or type(text) ~= "table" then
    notify(("cannot read %s"):format(path), vim.log.levels.WARN)
    return nil
  end
  local name = "kernel-lsp://ir/" .. vim.fs.basename(path)
  local buf = buffer_named(name)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].bufhidden = "wipe"
  end
  vim.bo[buf].readonly = false
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, text)
  vim.bo[buf].modifiable = false
  vim.bo[buf].readonly = true
  vim.bo[buf].modified = false
  stage = stage or path:match("%.(%w+)$")
  if IR_FILETYPES[stage] and vim.bo[buf].filetype ~= IR_FILETYPES[stage] then
    vim.bo[buf].filetype = IR_FILETYPES[stage]
  end
  vim.b[buf].kernel_lsp_ir = path
  vim.keymap.set("n", "<C-]>", M.ir_to_source, { buffer = buf, desc = "kernel-lsp: the source line of this IR line" })
  vim.api.nvim_buf_clear_namespace(buf, ir_ns, 0, -1)
  local count = vim.api.nvim_buf_line_count(buf)
  for _, l in ipairs(lines or {}) do
    if type(l) == "number" and l >= 0 and l < count then
      vim.api.nvim_buf_set_extmark(buf, ir_ns, l, 0, { line_hl_group = "KernelIRLine" })
    end
  end
  return buf
end

--- `<C-]>` in an IR buffer: the source line this IR line was compiled from (the server's definition on the IR
--- file), in a window that shows the source already (this tab's first), else in a split.
function M.ir_to_source()
  local path = vim.b.kernel_lsp_ir
  local client = M.client()
  if type(path) ~= "string" or not client then
    return
  end
  local params = { textDocument = { uri = vim.uri_from_fname(path) },
    position = { line = vim.api.nvim_win_get_cursor(0)[1] - 1, character = 0 } }
  client:request("textDocument/definition", params, function(err, found)
    local location = not err and type(found) == "table" and (found[1] or found.uri and found) or nil
    if not location then
      notify("this IR line comes from no line of the source", vim.log.levels.INFO)
      return
    end
    local fname = vim.uri_to_fname(location.uri)
    local tabs = vim.list_extend({ vim.api.nvim_get_current_tabpage() }, vim.api.nvim_list_tabpages())
    local win
    for _, tab in ipairs(tabs) do
      win = win or vim.iter(vim.api.nvim_tabpage_list_wins(tab)):find(function(w)
        return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)) == fname
      end)
    end
    if win then
      vim.api.nvim_set_current_win(win)
    else
      vim.cmd("belowright split " .. vim.fn.fnameescape(fname))
    end
    vim.lsp.util.show_document(location, client.offset_encoding, { focus = true })
  end, vim.api.nvim_get_current_buf())
end

--- Put the cursor of `win` on the first of `lines` (0-based), centred.
local function cursor_to(win, lines)
  local first = lines and lines[1]
  if type(first) == "number" and first >= 0 and first < vim.api.nvim_buf_line_count(vim.api.nvim_win_get_buf(win)) then
    vim.api.nvim_win_set_cursor(win, { first + 1, 0 })
    vim.api.nvim_win_call(win, function()
      vim.cmd("normal! zz")
    end)
  end
end

--- Show an IR file (written by the server under .kernel-lsp/ir/) in a read-only scratch buffer in a split, with
--- `lines` (0-based) highlighted and the cursor on the first. Reuses the split that shows it already.
function M.open_ir(path, lines, stage)
  local buf = ir_buffer(path, lines, stage)
  if not buf then
    return
  end
  local win = vim.iter(vim.api.nvim_tabpage_list_wins(0)):find(function(w)
    return vim.api.nvim_win_get_buf(w) == buf
  end)
  if win then
    vim.api.nvim_set_current_win(win)
  else
    vim.cmd(M.options.ir_split == "horizontal" and "belowright split" or "belowright vsplit")
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
  end
  cursor_to(win, lines)
  return buf, win
end

--- Open the two IR documents of a Compare IR answer in a new tab, A left and B right, in diff mode, each with the
--- instructions of the cursor's source line highlighted. Returns the two windows.
function M.open_comparison(result)
  local a = ir_buffer(result.a.path, result.a.lines, result.stage)
  local b = a and ir_buffer(result.b.path, result.b.lines, result.stage)
  if not (a and b) then
    return
  end
  vim.cmd("tabnew")
  local scratch = vim.api.nvim_get_current_buf()
  local left = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(left, a)
  if scratch ~= a and vim.api.nvim_buf_is_valid(scratch) then
    vim.api.nvim_buf_delete(scratch, { force = true })
  end
  vim.cmd("rightbelow vsplit")
  local right = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(right, b)
  for _, win in ipairs({ left, right }) do
    vim.api.nvim_win_call(win, function()
      vim.cmd("diffthis")
    end)
  end
  vim.t.kernel_lsp_compare = ("%s %s: A %s | B %s"):format(result.kernel, result.stage, result.a.description,
    result.b.description)
  cursor_to(right, result.b.lines)
  vim.api.nvim_set_current_win(left)
  cursor_to(left, result.a.lines)
  notify(vim.t.kernel_lsp_compare)
  return left, right
end

--- `:KernelCompareIR [stage] [A] [B] [B-python]`: the kernel under the cursor compiled two ways, its IR side by
--- side in diff mode. A and B are NAME=VALUE,... (constexprs, num_warps, num_stages; "-" for the kernel's first
--- configuration); B-python is an interpreter whose triton compiles side B (two triton versions). Without
--- arguments, asks for each.
function M.compare_ir(opts)
  local client = M.client()
  if not client then
    return M.execute(COMPARE_IR)
  end
  local function send(stage, a, b, b_python)
    local function given(v)
      return (v == nil or v == "-") and "" or v
    end
    local extra = { stage = stage ~= "" and stage or "ttgir", a = given(a), b = given(b) }
    if b_python and b_python ~= "" and b_python ~= "-" then
      extra.bPython = vim.fn.expand(b_python)
    end
    if extra.b == "" and extra.bPython then
      extra.b = extra.a -- two triton versions: the same values on both sides
    end
    M.execute(COMPARE_IR, function(result)
      if type(result) == "table" and type(result.a) == "table" and type(result.b) == "table" then
        M.open_comparison(result)
      end
    end, { M.position_argument(client, extra) })
  end
  local fargs = opts and opts.fargs or {}
  if #fargs > 0 then
    return send(fargs[1], fargs[2], fargs[3], fargs[4])
  end
  vim.ui.input({ prompt = "Compare IR, side A (NAME=VALUE,...; empty: the first configuration): " }, function(a)
    if a == nil then
      return
    end
    vim.ui.input({ prompt = "side B (NAME=VALUE,...; empty: as A): " }, function(b)
      if b == nil then
        return
      end
      vim.ui.input({ prompt = "Python whose triton compiles B (empty: the server's): " }, function(py)
        if py ~= nil then
          send("ttgir", a, b ~= "" and b or a, py)
        end
      end)
    end)
  end)
end

--- `:KernelIR [stage] [target]`: the compiled IR (ttgir by default; ttir, llir, ptx, sass, amdgcn) of the kernel
--- under the cursor, in a read-only split at the instructions that come from the cursor's line.
function M.show_ir(opts)
  local client = M.client()
  if not client then
    return M.execute(SHOW_IR)
  end
  local fargs = opts and opts.fargs or {}
  local argument = M.position_argument(client, { stage = fargs[1], target = fargs[2] })
  M.execute(SHOW_IR, function(result)
    if type(result) == "table" and type(result.path) == "string" then
      M.open_ir(result.path, result.lines, result.stage)
    end
  end, { argument })
end

local function show_document(err, params, ctx)
  local ok, fname = pcall(vim.uri_to_fname, type(params) == "table" and params.uri or "")
  if ok and type(fname) == "string" and fname:find("/.kernel-lsp/proposals/", 1, true) and not params.takeFocus then
    -- A proposal's table of what was tried: the preview of its edit (the workspace/applyEdit that follows)
    -- shows the same table under the summary, from the edit's change annotation.
    return { success = true }
  end
  local path = type(params) == "table" and not params.external and ir_path(params.uri)
  if path then
    local lines = {}
    local selection = params.selection
    if selection then
      for l = selection.start.line, selection["end"].line do
        lines[#lines + 1] = l
      end
    end
    M.open_ir(path, lines)
    return { success = true }
  end
  return vim.lsp.handlers[SHOW_DOCUMENT](err, params, ctx)
end

-- Proposals -----------------------------------------------------------------------------------------------------

local current -- the proposal being previewed: { title, edit, encoding, documents, buf, source_win }

--- The text documents a workspace edit changes: { uri, version (nil when not versioned), edits } each, plus the
--- file operations it makes (as lines for the preview). Nil and a reason when the edit is malformed.
local function edit_documents(edit)
  if type(edit) ~= "table" then
    return nil, "the proposal has no edit"
  end
  local documents, operations = {}, {}
  if type(edit.documentChanges) == "table" then
    for _, change in ipairs(edit.documentChanges) do
      if type(change) ~= "table" then
        return nil, "a document change is not an object"
      elseif change.kind == "create" or change.kind == "delete" then
        operations[#operations + 1] = ("%s %s"):format(change.kind, vim.uri_to_fname(change.uri))
      elseif change.kind == "rename" then
        operations[#operations + 1] = ("rename %s to %s"):format(vim.uri_to_fname(change.oldUri),
          vim.uri_to_fname(change.newUri))
      elseif type(change.textDocument) == "table" and type(change.textDocument.uri) == "string"
          and type(change.edits) == "table" then
        local version = change.textDocument.version
        documents[#documents + 1] = {
          uri = change.textDocument.uri,
          version = not is_null(version) and version or nil,
          edits = change.edits,
        }
      else
        return nil, "a document change has no textDocument.uri or edits"
      end
    end
  elseif type(edit.changes) == "table" then
    for uri, edits in pairs(edit.changes) do
      if type(uri) ~= "string" or type(edits) ~= "table" then
        return nil, "the edit's changes are not a map of uri to edits"
      end
      documents[#documents + 1] = { uri = uri, edits = edits }
    end
  else
    return nil, "the edit has neither documentChanges nor changes"
  end
  if #documents == 0 and #operations == 0 then
    return nil, "the edit changes nothing"
  end
  return documents, operations
end

--- The lines of a document now: its buffer when loaded, else the file on disk (none for a file not there yet).
local function document_lines(uri)
  local path = vim.uri_to_fname(uri)
  local bufnr = vim.fn.bufnr(path)
  if bufnr ~= -1 and vim.api.nvim_buf_is_loaded(bufnr) then
    return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), bufnr
  end
  if vim.fn.filereadable(path) == 1 then
    return vim.fn.readfile(path), nil
  end
  return {}, nil
end

--- The document's lines with the edits applied, computed in a throwaway buffer.
local function proposed_lines(lines, edits, encoding)
  local scratch = vim.api.nvim_create_buf(false, true)
  vim.bo[scratch].undolevels = -1
  vim.api.nvim_buf_set_lines(scratch, 0, -1, false, lines)
  local ok, err = pcall(vim.lsp.util.apply_text_edits, edits, scratch, encoding)
  local out = vim.api.nvim_buf_get_lines(scratch, 0, -1, false)
  vim.api.nvim_buf_delete(scratch, { force = true })
  if not ok then
    return nil, tostring(err)
  end
  return out
end

local function display_path(uri)
  return vim.fn.fnamemodify(vim.uri_to_fname(uri), ":~:.")
end

--- A table ([[header...], [row...], ...]) as aligned columns under a rule.
function M.format_table(rows)
  if type(rows) ~= "table" or #rows == 0 then
    return {}
  end
  local widths, cells = {}, {}
  for r, row in ipairs(rows) do
    cells[r] = {}
    for c, value in ipairs(type(row) == "table" and row or { row }) do
      local text = is_null(value) and "" or tostring(value)
      cells[r][c] = text
      widths[c] = math.max(widths[c] or 0, vim.fn.strdisplaywidth(text))
    end
  end
  local out = {}
  for r, row in ipairs(cells) do
    local parts = {}
    for c, text in ipairs(row) do
      parts[c] = text .. string.rep(" ", widths[c] - vim.fn.strdisplaywidth(text))
    end
    out[#out + 1] = (table.concat(parts, "  "):gsub("%s+$", ""))
    if r == 1 then
      local rule = {}
      for c = 1, #row do
        rule[c] = string.rep("-", widths[c])
      end
      out[#out + 1] = table.concat(rule, "  ")
    end
  end
  return out
end

local function close_preview()
  local p = current
  current = nil
  if not p then
    return
  end
  if p.buf and vim.api.nvim_buf_is_valid(p.buf) then
    vim.api.nvim_buf_delete(p.buf, { force = true })
  end
  if p.source_win and vim.api.nvim_win_is_valid(p.source_win) then
    vim.api.nvim_set_current_win(p.source_win)
  end
end

--- Preview a proposal ({title, summary, edit, table?}) from the server: a scratch buffer in a split with the
--- summary, the table and a unified diff of every change against the current text. Nothing is applied until
--- `accept()` (`a` or <CR> in the preview); `reject()` (`r` or `q`) drops it. `bufnr` is the buffer the proposal
--- is about (its kernel-lsp client gives the position encoding). Returns the preview buffer, or nil when the
--- proposal cannot be shown (the reason is in a message).
function M.preview_proposal(proposal, bufnr, opts)
  opts = opts or {}
  if type(proposal) ~= "table" then
    notify("the proposal is not an object", vim.log.levels.WARN)
    return nil
  end
  local documents, operations = edit_documents(proposal.edit)
  if not documents then
    notify(("cannot show the proposal: %s"):format(operations), vim.log.levels.WARN)
    return nil
  end
  local client = opts.client_id and vim.lsp.get_client_by_id(opts.client_id) or M.client(bufnr)
  local encoding = opts.encoding or (client and client.offset_encoding) or "utf-16"
  local title = type(proposal.title) == "string" and proposal.title or "Proposed edit"

  local lines = { "Proposal: " .. title }
  if type(proposal.summary) == "string" and proposal.summary ~= "" then
    vim.list_extend(lines, vim.split(proposal.summary, "\n", { plain = true }))
  end
  local tbl = M.format_table(proposal.table)
  if #tbl > 0 then
    lines[#lines + 1] = ""
    vim.list_extend(lines, tbl)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "a or <CR>: accept    r or q: reject"
  for _, op in ipairs(operations) do
    lines[#lines + 1] = op
  end
  for _, doc in ipairs(documents) do
    local before = document_lines(doc.uri)
    local after, why = proposed_lines(before, doc.edits, encoding)
    if not after then
      notify(("cannot show the proposal: the edit of %s does not apply: %s"):format(display_path(doc.uri), why),
        vim.log.levels.WARN)
      return nil
    end
    local diff = vim.diff(table.concat(before, "\n") .. "\n", table.concat(after, "\n") .. "\n",
      { result_type = "unified", ctxlen = 3 })
    lines[#lines + 1] = ""
    lines[#lines + 1] = "--- a/" .. display_path(doc.uri)
    lines[#lines + 1] = "+++ b/" .. display_path(doc.uri)
    if diff == "" then
      lines[#lines + 1] = "(no change to the text)"
    else
      vim.list_extend(lines, vim.split(diff:gsub("\n$", ""), "\n", { plain = true }))
    end
  end

  close_preview()
  local source_win = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "diff"
  pcall(vim.api.nvim_buf_set_name, buf, "kernel-lsp://proposal")
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_height(0, math.max(5, math.min(#lines, math.floor(vim.o.lines / 2))))
  for _, key in ipairs({ "a", "<CR>" }) do
    vim.keymap.set("n", key, M.accept, { buffer = buf, nowait = true, desc = "kernel-lsp: accept the proposal" })
  end
  for _, key in ipairs({ "r", "q" }) do
    vim.keymap.set("n", key, M.reject, { buffer = buf, nowait = true, desc = "kernel-lsp: reject the proposal" })
  end
  current = {
    title = title,
    edit = proposal.edit,
    encoding = encoding,
    documents = documents,
    buf = buf,
    source_win = source_win,
  }
  -- Closing the preview any other way drops the proposal: it can no longer be accepted unseen.
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    callback = function()
      if current and current.buf == buf then
        current = nil
      end
    end,
  })
  return buf
end

--- The proposal being previewed ({title, edit, buf}), or nil.
function M.proposal()
  return current and { title = current.title, edit = current.edit, buf = current.buf } or nil
end

--- Apply the previewed proposal (with the position encoding of its client), unless a document it edits has
--- changed since the proposal was made: then it is refused with a message. Returns whether it was applied.
function M.accept()
  local p = current
  if not p then
    notify("there is no proposal to accept", vim.log.levels.WARN)
    return false
  end
  for _, doc in ipairs(p.documents) do
    if doc.version then
      local _, bufnr = document_lines(doc.uri)
      local now = bufnr and vim.lsp.util.buf_versions[bufnr] or nil
      if now ~= doc.version then
        close_preview()
        notify(("not applied: %s changed since the proposal was made (version %d, now %s); ask again"):format(
          display_path(doc.uri), doc.version, now and tostring(now) or "not open"), vim.log.levels.WARN)
        return false
      end
    end
  end
  close_preview()
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, p.edit, p.encoding)
  if not ok then
    notify(("applying %s failed: %s"):format(p.title, tostring(err)), vim.log.levels.ERROR)
    return false
  end
  notify(("applied: %s"):format(p.title))
  return true
end

--- Drop the previewed proposal. Returns whether there was one.
function M.reject()
  local p = current
  if not p then
    return false
  end
  close_preview()
  notify(("rejected: %s"):format(p.title))
  return true
end

local function needs_confirmation(edit)
  for _, annotation in pairs(type(edit) == "table" and type(edit.changeAnnotations) == "table"
      and edit.changeAnnotations or {}) do
    if type(annotation) == "table" and annotation.needsConfirmation == true then
      return true
    end
  end
  return false
end

--- workspace/applyEdit: an edit whose change annotations need confirmation goes to the preview (the server is
--- told it was not applied); any other edit is applied as Neovim does.
local function apply_edit(err, params, ctx)
  if type(params) == "table" and needs_confirmation(params.edit) then
    local summary = {}
    for _, annotation in pairs(params.edit.changeAnnotations) do
      if type(annotation) == "table" then
        summary[#summary + 1] = annotation.description or annotation.label
      end
    end
    table.sort(summary)
    local title = params.label
    for _, annotation in pairs(params.edit.changeAnnotations) do
      if type(title) ~= "string" and type(annotation) == "table" and type(annotation.label) == "string" then
        title = annotation.label
      end
    end
    local buf = M.preview_proposal({ title = title, summary = table.concat(summary, "\n"), edit = params.edit },
      vim.api.nvim_get_current_buf(), { client_id = ctx.client_id })
    return { applied = false, failureReason = buf and "shown for confirmation" or "the edit could not be shown" }
  end
  return vim.lsp.handlers[APPLY_EDIT](err, params, ctx)
end

-- Set-up --------------------------------------------------------------------------------------------------------

--- Report the result of a command a code lens ran (Neovim's own lens runner drops it).
local function install_lens_result_reporter()
  local previous = vim.lsp.handlers[EXECUTE_COMMAND]
  if type(previous) == "function" and rawequal(previous, M._lens_reporter) then
    return
  end
  M._lens_reporter = function(err, result, ctx, config)
    local client = ctx and vim.lsp.get_client_by_id(ctx.client_id)
    if client and client.name == M.name and not err then
      local command = vim.tbl_get(ctx, "params", "command")
      M.handle_result(command, result, client, ctx.bufnr, command == RUN_CHECKS and report_checks or function()
      end)
    end
    if previous then
      return previous(err, result, ctx, config)
    end
  end
  vim.lsp.handlers[EXECUTE_COMMAND] = M._lens_reporter
end

local function map(bufnr, lhs, rhs, desc)
  if type(lhs) == "string" and lhs ~= "" then
    vim.keymap.set("n", lhs, rhs, { buffer = bufnr, desc = "kernel-lsp: " .. desc })
  end
end

--- What attaching to a buffer turns on: inlay hints, code lenses kept fresh, the buffer-local mappings.
function M.on_attach(client, bufnr)
  if M.options.inlay_hints and client:supports_method("textDocument/inlayHint", bufnr) then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  end
  if M.options.codelens and client:supports_method("textDocument/codeLens", bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
    vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "BufWritePost" }, {
      group = vim.api.nvim_create_augroup("kernel_lsp_lenses_" .. bufnr, { clear = true }),
      buffer = bufnr,
      desc = "kernel-lsp: refresh code lenses",
      callback = function(args)
        if #vim.lsp.get_clients({ name = M.name, bufnr = args.buf }) > 0 then
          vim.lsp.codelens.refresh({ bufnr = args.buf })
        end
      end,
    })
  end
  local mappings = M.options.mappings
  if type(mappings) == "table" then
    map(bufnr, mappings.lens_run, M.run_lens, "run the code lens on this line")
    map(bufnr, mappings.check, "<cmd>KernelCheck<cr>", "check the kernel under the cursor")
    map(bufnr, mappings.ir, "<cmd>KernelIR<cr>", "show the IR of the kernel under the cursor")
    map(bufnr, mappings.status, "<cmd>KernelStatus<cr>", "show the server status")
  end
end

--- The user command of each server command: its function and options. The commands without an entry here run
--- through M.run.
local SPECIAL = {
  [STATUS] = { M.status, {} },
  [REINDEX] = { M.reindex, {} },
  [SHOW_IR] = { M.show_ir, {
    nargs = "*",
    complete = function(_, cmdline, cursor)
      local words = vim.split(cmdline:sub(1, cursor), "%s+")
      if #words <= 2 then
        return M.STAGES
      end
      return #words == 3 and (vim.tbl_get(M.options, "settings", "targets") or M.TARGETS) or {}
    end,
  } },
  [COMPARE_IR] = { M.compare_ir, {
    nargs = "*",
    complete = function(_, cmdline, cursor)
      return #vim.split(cmdline:sub(1, cursor), "%s+") <= 2 and M.STAGES or {}
    end,
  } },
  [RUN_CHECKS] = { M.check, { bang = true } },
  [REFINE] = { M.refine, { nargs = "*" } },
}

local function define_user_commands()
  for _, c in ipairs(M.server_commands) do
    local special = SPECIAL[c.name]
    local fn = special and special[1] or function()
      M.run(c.name)
    end
    local options = vim.tbl_extend("force", { desc = "kernel-lsp: " .. (c.title or c.name) },
      special and special[2] or {})
    vim.api.nvim_create_user_command(c.user, fn, options)
  end
end

--- Register and enable the server for Python and CUDA buffers, and define the user commands.
function M.setup(opts)
  opts = opts or {}
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  if opts.mappings == false then
    M.options.mappings = false
  end
  local settings = json_settings(opts.settings)
  local handlers = {
    [CODELENS_REFRESH] = function(_, _, ctx)
      local client = vim.lsp.get_client_by_id(ctx.client_id)
      if client then
        M.refresh_lenses(client)
      end
      return vim.NIL
    end,
    [SHOW_DOCUMENT] = show_document,
    [APPLY_EDIT] = apply_edit,
  }
  local capabilities = {
    workspace = {
      codeLens = { refreshSupport = true },
      -- Proposed edits come annotated `needsConfirmation`: the preview is that confirmation.
      workspaceEdit = { documentChanges = true, changeAnnotationSupport = { groupsOnLabel = false } },
    },
  }
  if vim.lsp.handlers[DIAGNOSTIC_REFRESH] == nil then
    -- Neovim 0.11 has no handler for the server's "pull diagnostics again" request: provide one.
    capabilities.workspace.diagnostics = { refreshSupport = true }
    handlers[DIAGNOSTIC_REFRESH] = function(_, _, ctx)
      local client = vim.lsp.get_client_by_id(ctx.client_id)
      if client then
        M.refresh_diagnostics(client)
      end
      return vim.NIL
    end
  end
  local cmd = opts.cmd or default_cmd(opts.python)
  vim.lsp.config(M.name, {
    cmd = cmd,
    on_exit = function(code, _, client_id)
      M.server_exited(cmd, code, client_id)
    end,
    filetypes = { "python", "cuda" }, -- .cu files are compiled with nvcc where it is installed
    root_markers = { "pyproject.toml", "setup.py", ".git" },
    -- The TCP session token goes with initialize only: it is not a setting (workspace/configuration omits it).
    init_options = opts.token and vim.tbl_extend("force", vim.deepcopy(settings), { token = opts.token }) or settings,
    settings = { [M.section] = settings },
    capabilities = capabilities,
    handlers = handlers,
  })
  vim.lsp.enable(M.name)

  vim.api.nvim_set_hl(0, "KernelIRLine", { link = "CursorLine", default = true })
  install_lens_result_reporter()
  vim.api.nvim_clear_autocmds({ group = group })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    desc = "kernel-lsp: inlay hints, code lenses and mappings",
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == M.name then
        M.on_attach(client, args.buf)
      end
    end,
  })

  define_user_commands()
  vim.api.nvim_create_user_command("KernelLensRun", M.run_lens,
    { desc = "kernel-lsp: run the code lens on the cursor line" })
  vim.api.nvim_create_user_command("KernelAccept", M.accept, { desc = "kernel-lsp: apply the previewed proposal" })
  vim.api.nvim_create_user_command("KernelReject", M.reject, { desc = "kernel-lsp: drop the previewed proposal" })
  vim.api.nvim_create_user_command("KernelReport", function()
    M.report()
  end, { desc = "kernel-lsp: write the HTML report of the workspace and open it in the browser" })
end

return M
