-- The assistant in a real Neovim 0.11: ask for a plan, say "go", receive the proposal, confirm it (simulated),
-- apply it with vim.lsp.util.apply_workspace_edit, and write what happened as JSON to $KERNEL_LSP_TEST_RESULT.
local buf = vim.api.nvim_get_current_buf()
local result = {}

local function wait(ms, condition, what)
  if not vim.wait(ms, condition, 10) then
    error(("timed out after %d ms waiting for %s"):format(ms, what), 0)
  end
end

local function client()
  return vim.lsp.get_clients({ name = "kernel_lsp", bufnr = buf })[1]
end

local function execute(command, argument)
  local response = client():request_sync("workspace/executeCommand", { command = command, arguments = { argument } },
    60000, buf)
  assert(response, command .. ": no response within 60 s")
  assert(not response.err, command .. ": " .. vim.inspect(response.err))
  return response.result
end

local ok, err = xpcall(function()
  wait(10000, function()
    return client() ~= nil and client().initialized
  end, "kernel-lsp to attach")
  local where = { uri = vim.uri_from_bufnr(buf), line = tonumber(os.getenv("KERNEL_LSP_TEST_LINE")), character = 4 }
  result.lines_before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local plan = execute("kernel-lsp.assistantOptimize", where)
  result.plan = plan.plan
  result.lines_after_plan = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local answer = execute("kernel-lsp.refine", vim.tbl_extend("force", where, { instruction = "go" }))
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
end, debug.traceback)
if not ok then
  result.error = err
end

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
