-- Runs one test scenario ($KERNEL_LSP_TEST_SCENARIO) in the buffer Neovim was started on, writes what it saw
-- as JSON to $KERNEL_LSP_TEST_RESULT, stops the server and quits. Every wait is bounded; a failure is written
-- as { error = ... } so that the Python test can show it.
local kl = require("kernel_lsp")
local buf = vim.api.nvim_get_current_buf()
local result = { scenario = os.getenv("KERNEL_LSP_TEST_SCENARIO") }

local function wait(ms, condition, what)
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

local function execute(command)
  local response = client():request_sync("workspace/executeCommand", { command = command, arguments = {} }, 5000, buf)
  assert(response, command .. ": no response within 5 s")
  assert(not response.err, command .. ": " .. vim.inspect(response.err))
  return response.result
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
  wait(5000, function()
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

function scenarios.crossfile()
  wait(5000, function()
    return has_code("TR010")
  end, "TR010 for the launch of a kernel defined in another file")
  result.diagnostics = diagnostics()
end

local ok, err = xpcall(function()
  wait(5000, function()
    return client() ~= nil
  end, "kernel-lsp to attach")
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
