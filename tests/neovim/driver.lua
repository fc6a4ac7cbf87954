-- Runs one test scenario ($KERNEL_LSP_TEST_SCENARIO) in the buffer Neovim was started on, writes what it saw
-- as JSON to $KERNEL_LSP_TEST_RESULT, stops the server and quits. Every wait is bounded; a failure is written
-- as { error = ... } so that the Python test can show it.
local kl = require("kernel_lsp")
local buf = vim.api.nvim_get_current_buf()
local result = { scenario = os.getenv("KERNEL_LSP_TEST_SCENARIO") }

-- Every limit is scaled for the machine running the suite (tests/slow.py sets KERNEL_LSP_TEST_TIME_SCALE).
local scale = tonumber(os.getenv("KERNEL_LSP_TEST_TIME_SCALE") or "") or 1

local function wait(ms, condition, what)
  ms = ms * scale
  if not vim.wait(ms, condition, 10) then
    error(("timed out after %d ms waiting for %s"):format(ms, what), 0)
  end
end

local function client()
  return vim.lsp.get_clients({ name = kl.name, bufnr = buf })[1]
end

--- All diagnostics of the buffer, from every namespace (a duplicate from a second namespace must show).
local function diagnostics()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    out[#out + 1] = {
      code = d.code,
      source = d.source,
      lnum = d.lnum,
      col = d.col,
      end_lnum = d.end_lnum,
      end_col = d.end_col,
      severity = vim.diagnostic.severity[d.severity],
      message = d.message,
      namespace = vim.diagnostic.get_namespace(d.namespace).name,
    }
  end
  table.sort(out, function(a, b)
    if a.lnum ~= b.lnum then
      return a.lnum < b.lnum
    end
    return a.col < b.col
  end)
  return out
end

local function has_code(code)
  return vim.iter(vim.diagnostic.get(buf)):any(function(d)
    return d.code == code
  end)
end

local function execute_with(command, arguments, timeout_ms)
  timeout_ms = (timeout_ms or 5000) * scale
  local response = client():request_sync("workspace/executeCommand", { command = command, arguments = arguments },
    timeout_ms, buf)
  assert(response, ("%s: no response within %d s"):format(command, timeout_ms / 1000))
  assert(not response.err, command .. ": " .. vim.inspect(response.err))
  return response.result
end

local function execute(command)
  return execute_with(command, {})
end

--- Diagnostics once the server has indexed the workspace and the refresh that follows has been pulled.
local function settled_diagnostics()
  wait(5000, function()
    return #vim.diagnostic.get(buf) > 0
  end, "diagnostics")
  result.first = diagnostics()
  wait(5000, function()
    return execute(kl.commands.status).ready
  end, "the workspace index")
  vim.wait(150)
  return diagnostics()
end

local scenarios = {}

function scenarios.diagnostics()
  result.diagnostics = settled_diagnostics()
end

function scenarios.quickfix()
  local typo
  wait(5000, function()
    typo = vim.iter(vim.diagnostic.get(buf)):find(function(d)
      return d.code == "TR007"
    end)
    return typo ~= nil
  end, "the TR007 diagnostic")
  local c = client()
  local lsp_diag = typo.user_data.lsp
  local response = c:request_sync("textDocument/codeAction", {
    textDocument = vim.lsp.util.make_text_document_params(buf),
    range = lsp_diag.range,
    context = { diagnostics = { lsp_diag }, only = { "quickfix" }, triggerKind = 1 },
  }, 5000, buf)
  assert(response and not response.err, "codeAction failed: " .. vim.inspect(response))
  result.actions = vim.tbl_map(function(a)
    return { title = a.title, kind = a.kind, preferred = a.isPreferred == true }
  end, response.result or {})
  local preferred = vim.iter(response.result or {}):find(function(a)
    return a.isPreferred
  end)
  assert(preferred, "no preferred code action")
  result.line_before = vim.api.nvim_buf_get_lines(buf, typo.lnum, typo.lnum + 1, true)[1]
  result.typo_lnum = typo.lnum
  result.typo_col = typo.col
  result.offset_encoding = c.offset_encoding
  vim.lsp.util.apply_workspace_edit(preferred.edit, c.offset_encoding)
  result.line_applied = vim.api.nvim_buf_get_lines(buf, typo.lnum, typo.lnum + 1, true)[1]
  wait(5000, function()
    return not has_code("TR007")
  end, "TR007 to go away after the fix")
  vim.wait(150) -- a late or duplicate report would bring it back
  result.line_after = vim.api.nvim_buf_get_lines(buf, typo.lnum, typo.lnum + 1, true)[1]
  result.modified = vim.bo[buf].modified
  result.diagnostics = diagnostics()
end

function scenarios.status()
  wait(20000, function() -- the server starts in a fresh Python, slow on a busy machine
    return client() ~= nil
  end, "kernel-lsp to attach")
  wait(5000, function()
    result.status = execute(kl.commands.status)
    return result.status.ready
  end, "the workspace index")
  vim.cmd("KernelStatus")
  local float
  wait(3000, function()
    float = vim.iter(vim.api.nvim_list_wins()):find(function(w)
      return vim.api.nvim_win_get_config(w).relative ~= ""
    end)
    return float ~= nil
  end, "the :KernelStatus window")
  result.float = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(float), 0, -1, false)
  vim.cmd("KernelReindex")
  wait(5000, function()
    return vim.iter(_G.kernel_lsp_test.messages):any(function(m)
      return m:find("indexed", 1, true) ~= nil
    end)
  end, "the :KernelReindex message")
end

function scenarios.report()
  wait(5000, function()
    return client() ~= nil
  end, "kernel-lsp to attach")
  -- :KernelReport opens the page with vim.ui.open: record what it was asked to open instead of a browser.
  vim.ui.open = function(path)
    result.opened = path
    return nil
  end
  vim.cmd("KernelReport")
  wait(400000, function()
    return result.opened ~= nil
  end, "the report to be opened")
  -- The page without plotly's inline script (megabytes): what the test reads.
  local page = table.concat(vim.fn.readfile(result.opened), "\n")
  result.page = page:gsub("<script.-</script>", "<script></script>")
end

function scenarios.trust()
  wait(5000, function()
    return execute(kl.commands.status).ready
  end, "the workspace index")
  wait(5000, function()
    return #_G.kernel_lsp_test.questions > 0
  end, "the trust question")
  result.questions = vim.deepcopy(_G.kernel_lsp_test.questions)
  result.before = execute(kl.commands.status)
  -- :KernelTrust asks again, and the person answers Trust this time.
  _G.kernel_lsp_test.answer = "Trust"
  vim.cmd("KernelTrust")
  wait(10000, function()
    result.after = execute(kl.commands.status)
    return result.after.trusted
  end, "the workspace to be trusted")
end

function scenarios.crossfile()
  wait(5000, function()
    return has_code("TR010")
  end, "TR010 for the launch of a kernel defined in another file")
  result.diagnostics = diagnostics()
end

--- The notifications so far whose text contains `text`.
local function notes_with(text)
  return vim.iter(_G.kernel_lsp_test.notes):filter(function(n)
    return n.message:find(text, 1, true) ~= nil
  end):totable()
end

local function wait_note(ms, text)
  wait(ms, function()
    return #notes_with(text) > 0
  end, ("a message with %q"):format(text))
  return notes_with(text)
end

--- The code lens texts shown in the buffer (Neovim's virtual text), by 0-based line.
local function shown_lenses()
  local ns = vim.lsp.codelens.__namespaces[client().id]
  local out = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local text = table.concat(vim.tbl_map(function(chunk)
      return chunk[1]
    end, mark[4].virt_text or {}))
    if text ~= "" then
      out[#out + 1] = { line = mark[2], text = text }
    end
  end
  return out
end

local function lens_matching(pattern)
  return vim.iter(shown_lenses()):find(function(l)
    return l.text:find(pattern, 1, true) ~= nil
  end)
end

local function line_of(text)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, true)) do
    if line:find(text, 1, true) then
      return i - 1, line
    end
  end
  error("no line with " .. text, 0)
end

function scenarios.commands()
  local c = client()
  result.plugin_commands = vim.tbl_map(function(x)
    return { name = x.name, user = x.user, argument = x.argument, title = x.title }
  end, kl.server_commands)
  local defined = vim.api.nvim_get_commands({})
  result.defined = vim.tbl_map(function(x)
    return defined[x.user] ~= nil
  end, kl.server_commands)
  result.advertised = kl.advertised(c)
  result.inlay_hints_enabled = vim.lsp.inlay_hint.is_enabled({ bufnr = buf })
  result.mappings = {}
  for _, lhs in ipairs({ "<localleader>kl", "<localleader>kc", "<localleader>ki", "<localleader>ks" }) do
    result.mappings[lhs] = vim.fn.maparg(lhs, "n", false, true).desc or vim.NIL
  end
  -- A command the server does not offer is reported, not sent; so is every plugin command the server lacks.
  kl.execute("kernel-lsp.noSuchCommand")
  result.unadvertised = {}
  for _, x in ipairs(kl.server_commands) do
    if not vim.list_contains(result.advertised, x.name) then
      vim.cmd(x.user .. (x.name == kl.commands.refine and " go" or "")) -- no argument would prompt for one
      result.unadvertised[#result.unadvertised + 1] = x.user
    end
  end
  -- Results with an "error" key are warnings: a kernel without a spec, Show IR with compiling off.
  vim.api.nvim_win_set_cursor(0, { line_of("tl.arrange") + 1, 4 })
  vim.cmd("KernelCheck")
  wait_note(5000, "has no correctness spec")
  vim.cmd("KernelIR ttgir")
  wait_note(5000, "compiling is off")
  result.notes = _G.kernel_lsp_test.notes
end

function scenarios.lens()
  local run
  wait(10000, function()
    run = lens_matching("check against the reference")
    return run ~= nil
  end, "the '▶ check against the reference' lens")
  result.lens_before = run
  result.kernel_line = line_of("def add_kernel(")
  vim.api.nvim_win_set_cursor(0, { run.line + 1, 0 })
  local started = vim.uv.hrtime()
  vim.cmd("KernelLensRun")
  local verdict
  wait(20000, function()
    verdict = lens_matching("✓ correct")
    return verdict ~= nil
  end, "the lens to show the verdict")
  result.lens_s = (vim.uv.hrtime() - started) / 1e9
  result.lens_after = verdict
  result.lens_note = wait_note(5000, "✓ add_kernel")[1]
  -- :KernelCheck at a line inside the kernel body.
  vim.api.nvim_win_set_cursor(0, { line_of("tl.store(") + 1, 4 })
  started = vim.uv.hrtime()
  vim.cmd("KernelCheck")
  wait(20000, function()
    return #notes_with("✓ add_kernel") >= 2
  end, "the :KernelCheck verdict")
  result.check_s = (vim.uv.hrtime() - started) / 1e9
  result.check_note = notes_with("✓ add_kernel")[2]
  wait(5000, function()
    result.lenses = shown_lenses()
    return #result.lenses == 1 and result.lenses[1].text:find("✓ correct", 1, true) ~= nil
  end, "the lens to show the verdict again")
  -- :KernelCheck! checks the whole file, wherever the cursor is.
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd("KernelCheck!")
  wait(20000, function()
    return #notes_with("✓ add_kernel") >= 3
  end, "the :KernelCheck! verdict")
  result.file_check_notes = notes_with("checking every kernel of the file")
end

local function vector_add_proposal(new_text, version, extra)
  local lnum, line = line_of("def add(")
  local start, stop = line:find("block_size: int = %d+")
  assert(start, "no block_size default in " .. line)
  local digits = #line:sub(start, stop):match("%d+$")
  local col = stop - digits
  return vim.tbl_extend("force", {
    title = "Use block_size=" .. new_text,
    summary = "Fewer, larger programs.\nEstimated 1.2x faster (roofline model, sm_90).",
    table = { { "block_size", "estimate" }, { "1024", "10.0 us" }, { new_text, "8.3 us" } },
    edit = {
      documentChanges = { {
        textDocument = { uri = vim.uri_from_bufnr(buf), version = version or vim.lsp.util.buf_versions[buf] },
        edits = { {
          range = { start = { line = lnum, character = col }, ["end"] = { line = lnum, character = col + digits } },
          newText = new_text,
          annotationId = "tiling",
        } },
      } },
      changeAnnotations = { tiling = { label = "Optimize tiling", needsConfirmation = true } },
    },
  }, extra or {})
end

local function block_line()
  return select(2, line_of("def add("))
end

local function preview_state(preview)
  return {
    valid = preview ~= nil and vim.api.nvim_buf_is_valid(preview),
    current = preview ~= nil and vim.api.nvim_get_current_buf() == preview,
    lines = preview and vim.api.nvim_buf_is_valid(preview) and vim.api.nvim_buf_get_lines(preview, 0, -1, true),
    modifiable = preview and vim.api.nvim_buf_is_valid(preview) and vim.bo[preview].modifiable,
    windows = #vim.api.nvim_tabpage_list_wins(0),
  }
end

function scenarios.proposal()
  local c = client()
  result.line_before = block_line()
  -- Rejected with `r` in the preview: nothing changes.
  local preview = kl.preview_proposal(vector_add_proposal("2048"), buf)
  result.rejected_preview = preview_state(preview)
  vim.cmd("normal r")
  result.after_reject = { line = block_line(), modified = vim.bo[buf].modified, preview = preview_state(preview),
                          back_in_source = vim.api.nvim_get_current_buf() == buf }
  -- Accepted with `a`: the buffer changes.
  preview = kl.preview_proposal(vector_add_proposal("2048"), buf)
  vim.cmd("normal a")
  result.after_accept = { line = block_line(), modified = vim.bo[buf].modified, preview = preview_state(preview),
                          back_in_source = vim.api.nvim_get_current_buf() == buf }
  -- The document changes while the proposal is shown: accepting it is refused.
  preview = kl.preview_proposal(vector_add_proposal("4096"), buf)
  vim.api.nvim_buf_set_lines(buf, -1, -1, true, { "# edited after the proposal" })
  result.stale_accepted = kl.accept()
  result.after_stale = { line = block_line(), preview = preview_state(preview) }
  -- workspace/applyEdit with needsConfirmation goes to the same preview; without it, it is applied at once.
  local handler = c.handlers["workspace/applyEdit"]
  local ctx = { client_id = c.id, method = "workspace/applyEdit", bufnr = buf }
  local confirm = vector_add_proposal("512")
  result.apply_edit_response = handler(nil, { label = "Optimize tiling", edit = confirm.edit }, ctx)
  result.apply_edit_preview = preview_state(kl.proposal() and kl.proposal().buf)
  result.line_while_shown = block_line()
  result.apply_edit_accepted = kl.accept()
  result.line_after_apply_edit = block_line()
  local lnum, line = line_of("def add(")
  local plain = { changes = { [vim.uri_from_bufnr(buf)] = { {
    range = { start = { line = lnum, character = 0 }, ["end"] = { line = lnum, character = #line } },
    newText = "def add(x, y, block_size=256):",
  } } } }
  result.plain_apply_edit_response = handler(nil, { edit = plain }, ctx)
  result.line_after_plain = block_line()
  -- Bad input is a message, not an error.
  result.bad_proposal = kl.preview_proposal("not a proposal", buf)
  result.no_edit = kl.preview_proposal({ title = "nothing" }, buf)
  result.accept_without_proposal = kl.accept()
  result.notes = _G.kernel_lsp_test.notes
end

function scenarios.compiled()
  wait(20000, function()
    return #vim.lsp.inlay_hint.get({ bufnr = buf }) > 0
  end, "inlay hints (the kernel's compile)")
  result.inlay_hints_enabled = vim.lsp.inlay_hint.is_enabled({ bufnr = buf })
  result.hints = vim.tbl_map(function(h)
    local label = h.inlay_hint.label
    return {
      line = h.inlay_hint.position.line,
      label = type(label) == "string" and label or table.concat(vim.tbl_map(function(p)
        return p.value
      end, label)),
    }
  end, vim.lsp.inlay_hint.get({ bufnr = buf }))
  result.kernel_line = line_of("def add_kernel(")
  local source_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_cursor(0, { line_of("tl.store(") + 1, 4 })
  local argument = kl.position_argument(client(), { stage = "ttgir" })
  vim.cmd("KernelIR ttgir")
  local ir_win
  wait(10000, function()
    ir_win = vim.iter(vim.api.nvim_tabpage_list_wins(0)):find(function(w)
      return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)):find("kernel-lsp://ir/", 1, true) ~= nil
    end)
    return ir_win ~= nil
  end, "the IR split")
  -- The command's own result (which may arrive after window/showDocument) names the lines to show.
  local expected = execute_with(kl.commands.ir, { argument })
  vim.wait(200)
  local ir_buf = vim.api.nvim_win_get_buf(ir_win)
  result.ir = {
    name = vim.api.nvim_buf_get_name(ir_buf),
    windows = #vim.api.nvim_tabpage_list_wins(0),
    source_shown = vim.api.nvim_win_is_valid(source_win) and vim.api.nvim_win_get_buf(source_win) == buf,
    modifiable = vim.bo[ir_buf].modifiable,
    readonly = vim.bo[ir_buf].readonly,
    buftype = vim.bo[ir_buf].buftype,
    filetype = vim.bo[ir_buf].filetype,
    line_count = vim.api.nvim_buf_line_count(ir_buf),
    cursor = vim.api.nvim_win_get_cursor(ir_win)[1] - 1,
    highlighted = vim.tbl_map(function(m)
      return m[2]
    end, vim.api.nvim_buf_get_extmarks(ir_buf, vim.api.nvim_get_namespaces().kernel_lsp_ir, 0, -1, {})),
  }
  result.ir_result = expected
end

--- Port to NKI: a plan, "go", a proposal that creates a file beside the Triton one; applied after the
--- (simulated) confirmation, it creates that file's buffer and leaves the Triton buffer as it was.
function scenarios.port()
  wait(10000, function()
    return client().initialized
  end, "kernel-lsp to initialize")
  local where = { uri = vim.uri_from_bufnr(buf), line = tonumber(os.getenv("KERNEL_LSP_TEST_LINE")), character = 4 }
  result.lines_before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  execute_with("kernel-lsp.portToNki", { where }, 60000)
  local answer = execute_with("kernel-lsp.refine", { vim.tbl_extend("force", where, { instruction = "go" }) }, 120000)
  local proposal = answer.proposal
  assert(proposal, "no proposal: " .. vim.inspect(answer))
  result.summary = proposal.summary
  result.creates = proposal.creates
  result.existed_before_confirmation = vim.uv.fs_stat(vim.uri_to_fname(proposal.creates)) ~= nil
  vim.lsp.util.apply_workspace_edit(proposal.edit, client().offset_encoding)
  local created = vim.uri_to_bufnr(proposal.creates)
  vim.fn.bufload(created)
  result.created_lines = vim.api.nvim_buf_get_lines(created, 0, -1, false)
  result.lines_after = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- :KernelOptimize through the real server: the proposal's preview shows the table of the configurations tried.
function scenarios.optimize_table()
  wait(10000, function()
    return client().initialized
  end, "kernel-lsp to initialize")
  vim.api.nvim_win_set_cursor(0, { line_of("def add_kernel(") + 1, 4 })
  vim.cmd("KernelOptimize")
  wait(600000, function()
    return kl.proposal() ~= nil
  end, "the tiling proposal's preview")
  local preview = kl.proposal().buf
  result.preview = preview_state(preview)
  result.source_shown = vim.iter(vim.api.nvim_tabpage_list_wins(0)):any(function(w)
    return vim.api.nvim_win_get_buf(w) == buf
  end)
  result.tabs = #vim.api.nvim_list_tabpages()
  kl.reject()
end

--- :KernelCompareIR with both sides' values: a new tab with the two IR documents side by side in diff mode.
function scenarios.compare_ir()
  wait(10000, function()
    return client().initialized
  end, "kernel-lsp to initialize")
  local source_tab = vim.api.nvim_get_current_tabpage()
  vim.api.nvim_win_set_cursor(0, { line_of("x = tl.load(") + 1, 8 })
  local argument = kl.position_argument(client(), { stage = "ptx", a = "BLOCK_SIZE=256,num_warps=4",
    b = "BLOCK_SIZE=1024,num_warps=8" })
  vim.cmd("KernelCompareIR ptx BLOCK_SIZE=256,num_warps=4 BLOCK_SIZE=1024,num_warps=8")
  wait(120000, function()
    return #vim.api.nvim_list_tabpages() == 2
  end, "the comparison's tab")
  -- The command's own answer (a second compile, from triton's cache) names the files and lines shown.
  result.compare_result = execute_with(kl.commands.compare_ir, { argument }, 120000)
  local tab = vim.api.nvim_get_current_tabpage()
  result.compare = {
    new_tab = tab ~= source_tab,
    title = vim.t[tab].kernel_lsp_compare,
    current = vim.api.nvim_get_current_win(),
    windows = vim.tbl_map(function(w)
      local b = vim.api.nvim_win_get_buf(w)
      return {
        win = w,
        name = vim.api.nvim_buf_get_name(b),
        diff = vim.wo[w].diff,
        readonly = vim.bo[b].readonly,
        filetype = vim.bo[b].filetype,
        line_count = vim.api.nvim_buf_line_count(b),
        cursor = vim.api.nvim_win_get_cursor(w)[1] - 1,
        highlighted = vim.tbl_map(function(m)
          return m[2]
        end, vim.api.nvim_buf_get_extmarks(b, vim.api.nvim_get_namespaces().kernel_lsp_ir, 0, -1, {})),
      }
    end, vim.api.nvim_tabpage_list_wins(tab)),
  }
  -- <C-]> on B's first highlighted line: back to the source line it comes from, in the source's window.
  local right = vim.api.nvim_tabpage_list_wins(tab)[2]
  vim.api.nvim_set_current_win(right)
  vim.api.nvim_win_set_cursor(right, { result.compare_result.b.lines[1] + 1, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-]>", true, false, true), "x", false)
  wait(10000, function()
    return vim.api.nvim_get_current_buf() == buf
  end, "the source line of the IR line")
  result.jumped_to = vim.api.nvim_win_get_cursor(0)[1] - 1
  result.load_line = line_of("x = tl.load(")
end

--- The assistant's good path: a plan, "go", the proposal back, and the edit applied with
--- vim.lsp.util.apply_workspace_edit only after a (simulated) confirmation. The cursor's line is
--- $KERNEL_LSP_TEST_LINE; the model behind it is the test's fake Messages API.
function scenarios.assistant()
  wait(10000, function()
    return client().initialized
  end, "kernel-lsp to initialize")
  local where = { uri = vim.uri_from_bufnr(buf), line = tonumber(os.getenv("KERNEL_LSP_TEST_LINE")), character = 4 }
  result.lines_before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local plan = execute_with("kernel-lsp.assistantOptimize", { where }, 60000)
  result.plan = plan.plan
  result.lines_after_plan = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local answer = execute_with("kernel-lsp.refine", { vim.tbl_extend("force", where, { instruction = "go" }) }, 60000)
  local proposal = answer.proposal
  assert(proposal, "no proposal: " .. vim.inspect(answer))
  result.summary = proposal.summary
  result.title = proposal.title
  result.lines_before_confirmation = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  result.modified_before_confirmation = vim.bo[buf].modified
  -- The user reads the summary and confirms.
  vim.lsp.util.apply_workspace_edit(proposal.edit, client().offset_encoding)
  result.lines_after = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  result.modified_after = vim.bo[buf].modified
end

--- A server command that cannot start: the message names the command and how to install kernel-lsp.
function scenarios.no_server()
  result.notes = wait_note(20000, "the server did not start")
end

local ok, err = xpcall(function()
  if result.scenario ~= "no_server" then
    wait(20000, function() -- the server starts in a fresh Python, slow on a busy machine
      return client() ~= nil
    end, "kernel-lsp to attach")
  end
  local scenario = scenarios[result.scenario]
  assert(scenario, "unknown scenario " .. tostring(result.scenario))
  scenario()
end, debug.traceback)
if not ok then
  result.error = err
  result.diagnostics_at_failure = diagnostics()
end
result.messages = _G.kernel_lsp_test.messages
result.clients = #vim.lsp.get_clients({ name = kl.name })

local fh = assert(io.open(assert(os.getenv("KERNEL_LSP_TEST_RESULT")), "w"))
fh:write(vim.json.encode(result))
fh:close()

for _, c in ipairs(vim.lsp.get_clients()) do
  c:stop()
end
vim.wait(2000, function()
  return #vim.lsp.get_clients() == 0
end, 10)
vim.cmd("qa!")
