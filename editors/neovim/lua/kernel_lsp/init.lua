--- kernel-lsp for Neovim 0.11+: diagnostics, quick fixes and commands for GPU kernel code (Triton, NKI).
---
--- ```lua
--- require("kernel_lsp").setup({
---   cmd = nil,        -- how to start the server; default: `kernel-lsp serve` (or `python -m kernel_lsp serve`)
---   python = nil,     -- a Python interpreter that has kernel-lsp installed, e.g. ".venv/bin/python"
---   settings = {},    -- the `kernelLsp` settings (docs/configuration.md), e.g. { ignore = { "TR009" } }
--- })
--- ```
---
--- The server is registered with `vim.lsp.config("kernel_lsp", ...)` and `vim.lsp.enable("kernel_lsp")`, so
--- anything else about it can be changed the usual way, e.g. `vim.lsp.config("kernel_lsp", { on_attach = ... })`.
--- Commands: `:KernelStatus` (what the server has indexed), `:KernelReindex` (index the workspace again) and
--- `:KernelIR [stage]` (the compiled IR of the kernel under the cursor).
local M = {}

M.name = "kernel_lsp"
M.section = "kernelLsp"
M.commands = { status = "kernel-lsp.status", reindex = "kernel-lsp.reindex", ir = "kernel-lsp.showIR" }

local REFRESH = "workspace/diagnostic/refresh"

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

local function default_cmd(python)
  if python then
    return { vim.fn.expand(python), "-m", "kernel_lsp", "serve" }
  end
  if vim.fn.executable("kernel-lsp") == 1 then
    return { "kernel-lsp", "serve" }
  end
  return { vim.fn.executable("python3") == 1 and "python3" or "python", "-m", "kernel_lsp", "serve" }
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

--- The kernel-lsp client of a buffer (default: the current one), else any running kernel-lsp client.
function M.client(bufnr)
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = bufnr or 0 })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  return clients[1]
end

--- Run a server command; `on_result(result, client)` gets its result, errors are reported with vim.notify.
function M.execute(command, on_result, arguments)
  local client = M.client()
  if not client then
    vim.notify("kernel-lsp is not running (open a Python file in a project first)", vim.log.levels.WARN)
    return
  end
  client:exec_cmd({ title = command, command = command, arguments = arguments or {} }, { bufnr = 0 }, function(err, result)
    if err then
      vim.notify(("kernel-lsp: %s failed: %s"):format(command, err.message or tostring(err)), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result, client)
    end
  end)
end

local function sorted_keys(t)
  local keys = vim.tbl_keys(t)
  table.sort(keys)
  return keys
end

--- The status object as lines: `key: value`, one level of nesting indented.
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
      lines[#lines + 1] = ("%s: %s"):format(key, table.concat(vim.tbl_map(tostring, value), ", "))
    else
      lines[#lines + 1] = ("%s: %s"):format(key, type(value) == "string" and value or vim.inspect(value))
    end
  end
  return lines
end

--- `:KernelStatus`: the server's status in a floating window (closed when the cursor moves).
function M.status()
  M.execute(M.commands.status, function(result)
    vim.lsp.util.open_floating_preview(M.format_status(result or {}), "yaml", {
      border = "rounded",
      title = " kernel-lsp ",
      focus_id = "kernel_lsp_status",
    })
  end)
end

--- `:KernelReindex`: index the workspace from disk again (the server then asks for fresh diagnostics).
function M.reindex()
  M.execute(M.commands.reindex, function(result)
    local n = vim.tbl_get(result or {}, "indexed") or {}
    vim.notify(("kernel-lsp: indexed %d files, %d Triton and %d NKI kernels"):format(
      n.files or 0, n.tritonKernels or 0, n.nkiKernels or 0))
  end)
end

--- `:KernelIR [stage]`: the compiled IR (ttgir by default; ttir, llir, ptx, amdgcn) of the kernel under the cursor,
--- opened at the instructions that come from the cursor's line. The server opens it through window/showDocument;
--- the file is opened here only if that did not happen.
function M.show_ir(opts)
  local client = M.client()
  if not client then
    vim.notify("kernel-lsp is not running (open a Python file in a project first)", vim.log.levels.WARN)
    return
  end
  local stage = opts and opts.args ~= "" and opts.args or vim.NIL
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  M.execute(M.commands.ir, function(result)
    if type(result) ~= "table" then
      return
    end
    if result.error then
      vim.notify("kernel-lsp: " .. result.error, vim.log.levels.WARN)
    elseif result.path and vim.fn.bufnr(result.path) == -1 then
      vim.cmd.edit(vim.fn.fnameescape(result.path))
      if result.lines and result.lines[1] then
        vim.api.nvim_win_set_cursor(0, { result.lines[1] + 1, 0 })
      end
    end
  end, { params.textDocument.uri, params.position.line, params.position.character, stage })
end

--- Register and enable the server for Python buffers, and define the user commands.
function M.setup(opts)
  opts = opts or {}
  local settings = json_settings(opts.settings)
  local config = {
    cmd = opts.cmd or default_cmd(opts.python),
    filetypes = { "python", "cuda" },  -- .cu files are compiled with nvcc where it is installed
    root_markers = { "pyproject.toml", "setup.py", ".git" },
    init_options = settings,
    settings = { [M.section] = settings },
  }
  if vim.lsp.handlers[REFRESH] == nil then
    -- Neovim 0.11 has no handler for the server's "pull diagnostics again" request: provide one.
    config.capabilities = { workspace = { diagnostics = { refreshSupport = true } } }
    config.handlers = {
      [REFRESH] = function(_, _, ctx)
        local client = vim.lsp.get_client_by_id(ctx.client_id)
        if client then
          M.refresh_diagnostics(client)
        end
        return vim.NIL
      end,
    }
  end
  vim.lsp.config(M.name, config)
  vim.lsp.enable(M.name)

  vim.api.nvim_create_user_command("KernelStatus", M.status, { desc = "kernel-lsp: show the server status" })
  vim.api.nvim_create_user_command("KernelReindex", M.reindex, { desc = "kernel-lsp: index the workspace again" })
  vim.api.nvim_create_user_command("KernelIR", M.show_ir, {
    desc = "kernel-lsp: show the compiled IR of the kernel under the cursor",
    nargs = "?",
    complete = function()
      return { "ttir", "ttgir", "llir", "ptx", "amdgcn" }
    end,
  })
end

return M
