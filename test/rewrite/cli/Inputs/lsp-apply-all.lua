-- Drives accel-rewrite --lsp from a headless Neovim (lsp.test): opens $ACCEL_FILE, waits for
-- the diagnostics, applies the "apply all" quick fix, writes the file. Exits 0 on success,
-- 1 with a message on stderr otherwise.
local function fail(message)
  io.stderr:write('lsp-apply-all: ' .. message .. '\n')
  vim.cmd('cquit 1')
end

vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.ACCEL_FILE))
local buffer = vim.api.nvim_get_current_buf()
local client = vim.lsp.start_client({
  name = 'accel-rewrite',
  cmd = { vim.env.ACCEL_REWRITE, '--lsp' },
  root_dir = vim.fn.fnamemodify(vim.env.ACCEL_FILE, ':h'),
})
if not client then fail('the server did not start') end
vim.lsp.buf_attach_client(buffer, client)

if not vim.wait(120000, function() return #vim.diagnostic.get(buffer) > 0 end, 100) then
  fail('no diagnostics within 120 s')
end
local diagnostics = vim.diagnostic.get(buffer)
io.stdout:write(#diagnostics .. ' diagnostics\n')
for _, d in ipairs(diagnostics) do
  io.stdout:write((d.lnum + 1) .. ':' .. (d.col + 1) .. ' ' .. d.message .. '\n')
end

local params = {
  textDocument = vim.lsp.util.make_text_document_params(buffer),
  range = { start = { line = 0, character = 0 },
            ['end'] = { line = vim.api.nvim_buf_line_count(buffer), character = 0 } },
  context = { diagnostics = {} },
}
local replies = vim.lsp.buf_request_sync(buffer, 'textDocument/codeAction', params, 60000)
local all
for _, reply in pairs(replies or {}) do
  for _, action in ipairs(reply.result or {}) do
    io.stdout:write('action: ' .. action.title .. '\n')
    if action.title:find('apply all', 1, true) then all = action end
  end
end
if not all then fail('no "apply all" code action') end
vim.lsp.util.apply_workspace_edit(all.edit, 'utf-16')
vim.cmd('write')
io.stdout:write('written\n')
vim.cmd('qall!')
