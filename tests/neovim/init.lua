-- The tests' Neovim config: nothing but the plugin from this repository, set up with $KERNEL_LSP_TEST_SETUP
-- (a JSON object for require("kernel_lsp").setup). Messages the server shows are recorded for the driver.
vim.g.loaded_python3_provider = 0
vim.g.loaded_node_provider = 0
vim.g.loaded_perl_provider = 0
vim.g.loaded_ruby_provider = 0
vim.opt.swapfile = false
vim.opt.shadafile = "NONE"

local here = vim.fs.dirname(vim.fs.abspath(debug.getinfo(1, "S").source:sub(2)))
vim.opt.runtimepath:prepend(vim.fs.joinpath(here, "..", "..", "editors", "neovim"))

_G.kernel_lsp_test = { messages = {}, notes = {}, questions = {} }
-- A question (window/showMessageRequest, the server's trust prompt) would wait for a keypress: record it and
-- dismiss it, as a user pressing <Esc> would, or pick the action a scenario put in `answer`.
vim.lsp.handlers["window/showMessageRequest"] = function(_, params)
  table.insert(_G.kernel_lsp_test.questions, params.message)
  local answer = _G.kernel_lsp_test.answer
  return answer and { title = answer } or vim.NIL
end
local show_message = vim.lsp.handlers["window/showMessage"]
vim.lsp.handlers["window/showMessage"] = function(err, params, ctx)
  table.insert(_G.kernel_lsp_test.messages, params.message)
  return show_message(err, params, ctx)
end
local LEVELS = {}
for name, n in pairs(vim.log.levels) do
  LEVELS[n] = name
end
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(_G.kernel_lsp_test.messages, msg)
  table.insert(_G.kernel_lsp_test.notes, { message = msg, level = LEVELS[level or vim.log.levels.INFO] })
  return notify(msg, level, opts)
end

require("kernel_lsp").setup(vim.json.decode(os.getenv("KERNEL_LSP_TEST_SETUP") or "{}"))
-- Keep the server in Neovim's process group so that the test can kill everything if Neovim hangs.
vim.lsp.config("kernel_lsp", { detached = false })
