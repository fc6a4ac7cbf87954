;;; kernel-lsp.el --- kernel-lsp for Emacs through eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools

;;; Commentary:

;; Registers kernel-lsp (a language server for Triton and NKI GPU kernels) with eglot for `python-mode' and
;; `python-ts-mode', passes `kernel-lsp-settings' as its initializationOptions, and starts it by itself in
;; buffers that contain kernels.  Diagnostics appear through flymake, quick fixes through `eglot-code-actions'.
;;
;;   (add-to-list 'load-path "~/src/kernel-lsp/editors/emacs")
;;   (require 'kernel-lsp)
;;   (setq kernel-lsp-python "~/project/.venv/bin/python")   ; an interpreter that has kernel-lsp
;;   (setq kernel-lsp-settings '(:ignore ["TR009"] :targets ["sm_90" "sm_80"]))
;;   (kernel-lsp-setup)
;;
;; Commands: `kernel-lsp-status', `kernel-lsp-reindex', `kernel-lsp-show-ir' (the compiled IR of the kernel at
;; point; \[xref-find-definitions] in it goes back to the source line) and `kernel-lsp-execute' (any command
;; the server offers).  Emacs 28 (Debian 12) needs eglot from ELPA or `apt install elpa-eglot'; Emacs 29 has it
;; built in.  See docs/editors.md.

;;; Code:

(require 'eglot)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)
(require 'xref)

(defgroup kernel-lsp nil
  "kernel-lsp, the language server for GPU kernels."
  :group 'tools
  :prefix "kernel-lsp-")

(defcustom kernel-lsp-python nil
  "A Python interpreter that has kernel-lsp installed; the server runs as `PYTHON -P -m kernel_lsp serve'.
When nil, `kernel-lsp-command' decides."
  :type '(choice (const :tag "Automatic" nil) file))

(defcustom kernel-lsp-command nil
  "The command line that starts the server, a list of strings.
When nil: `kernel-lsp-python' when set, else `kernel-lsp serve' when kernel-lsp is on `exec-path', else
`python3 -P -m kernel_lsp serve' (-P: the current folder is not on the import path)."
  :type '(choice (const :tag "Automatic" nil) (repeat string)))

(defcustom kernel-lsp-settings nil
  "kernel-lsp settings (docs/configuration.md) as a plist, sent as initializationOptions.
For example (:ignore [\"TR009\"] :severity (:NK \"hint\") :compile \"off\").  Use vectors for lists."
  :type 'plist)

(defcustom kernel-lsp-tcp nil
  "Connect to a running `kernel-lsp serve --tcp' instead of starting the server: a list (HOST PORT).
The server's session token is read from `kernel-lsp-token-file' and sent with initialize (docs/editors.md)."
  :type '(choice (const :tag "Start the server (stdio)" nil) (list string integer)))

(defcustom kernel-lsp-token-file nil
  "The file holding the session token of the server `kernel-lsp-tcp' names.
When nil: $XDG_RUNTIME_DIR/kernel-lsp/tcp-PORT.token, else ~/.cache/kernel-lsp/tcp-PORT.token, where the server
writes it by default."
  :type '(choice (const :tag "The server's default" nil) file))

(defcustom kernel-lsp-auto-start 'kernels
  "When `kernel-lsp-setup' starts eglot in Python buffers by itself.
`kernels': in buffers that contain Triton or NKI kernels; `always': in every Python buffer; nil: never (run
\\[eglot] yourself)."
  :type '(choice (const :tag "Buffers with kernels" kernels) (const :tag "Every Python buffer" always)
                 (const :tag "Never" nil)))

(defcustom kernel-lsp-root-markers '("pyproject.toml" "setup.py" "setup.cfg")
  "Files that mark a project's root where no version control does (no .git above the file).
The nearest folder above a Python buffer holding one of them is its project, so the server indexes the
launchers and helpers beside the kernel, as Neovim's root markers do."
  :type '(repeat string))

(defconst kernel-lsp-modes '(python-mode python-ts-mode)
  "The major modes kernel-lsp serves.")

(defconst kernel-lsp--kernel-regexp
  (rx (or (seq "@" (* (any alnum "_.")) "jit" symbol-end)
          (seq bol (* space) (or "import" "from") (+ space) (or "triton" "nki" "neuronxcc") symbol-end)))
  "Text that marks a buffer as kernel code: a jit decorator, or an import of triton or NKI.")

(defclass kernel-lsp-server (eglot-lsp-server) ()
  "The kernel-lsp language server.")

(defun kernel-lsp--token ()
  "The session token of the TCP server `kernel-lsp-tcp' names."
  (let ((file (or kernel-lsp-token-file
                  (expand-file-name (format "kernel-lsp/tcp-%d.token" (cadr kernel-lsp-tcp))
                                    (or (getenv "XDG_RUNTIME_DIR") "~/.cache")))))
    (with-temp-buffer
      (insert-file-contents file)
      (string-trim (buffer-string)))))

(cl-defmethod eglot-initialization-options ((_server kernel-lsp-server))
  (let ((settings (copy-sequence kernel-lsp-settings)))
    (when kernel-lsp-tcp  ; the token goes with initialize only: it is not a setting
      (setq settings (plist-put settings :token (kernel-lsp--token))))
    (or settings eglot--{})))

(defun kernel-lsp--command ()
  (cond (kernel-lsp-command kernel-lsp-command)
        (kernel-lsp-python (list (expand-file-name kernel-lsp-python) "-P" "-m" "kernel_lsp" "serve"))
        ((executable-find "kernel-lsp") (list "kernel-lsp" "serve"))
        (t (list (or (executable-find "python3") "python") "-P" "-m" "kernel_lsp" "serve"))))

(defun kernel-lsp-contact (&optional _interactive)
  "The eglot contact for kernel-lsp: its server class and command line (or TCP address)."
  (cons 'kernel-lsp-server (or kernel-lsp-tcp (kernel-lsp--command))))

(defun kernel-lsp-buffer-has-kernels-p ()
  "Whether the current buffer contains Triton or NKI kernel code."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char (point-min))
      (let ((case-fold-search nil))
        (re-search-forward kernel-lsp--kernel-regexp nil t)))))

(defun kernel-lsp-maybe-start ()
  "Start eglot with kernel-lsp in this buffer, as `kernel-lsp-auto-start' says."
  (when (and buffer-file-name
             (or (eq kernel-lsp-auto-start 'always)
                 (and (eq kernel-lsp-auto-start 'kernels) (kernel-lsp-buffer-has-kernels-p))))
    (eglot-ensure)))

;;;###autoload
(defun kernel-lsp-setup ()
  "Register kernel-lsp as eglot's server for Python buffers and start it where `kernel-lsp-auto-start' says.
Eglot runs one server per project and major mode: this replaces another Python server (pylsp, pyright) in
eglot for the modes in `kernel-lsp-modes'."
  (setq eglot-server-programs
        (cons (cons kernel-lsp-modes #'kernel-lsp-contact)
              (cl-remove-if (lambda (entry) (eq (cdr entry) #'kernel-lsp-contact)) eglot-server-programs)))
  (add-hook 'project-find-functions #'kernel-lsp-project-root 90)  ; after version control's
  (dolist (mode kernel-lsp-modes)
    (add-hook (intern (format "%s-hook" mode)) #'kernel-lsp-maybe-start)))

(defun kernel-lsp-project-root (dir)
  "A project for a Python buffer outside version control: the nearest folder above DIR holding one of
`kernel-lsp-root-markers' (a `transient' project, which eglot and project.el read as its root)."
  (when (memq major-mode kernel-lsp-modes)
    (let ((roots (delq nil (mapcar (lambda (marker) (locate-dominating-file dir marker))
                                   kernel-lsp-root-markers))))
      (when roots
        ;; The nearest: the longest of the folders found.
        (cons 'transient (expand-file-name (car (sort roots (lambda (a b) (> (length a) (length b)))))))))))

;;; Commands

(defun kernel-lsp--server ()
  (let ((server (eglot-current-server)))
    (unless (and server (cl-typep server 'kernel-lsp-server))
      (user-error "kernel-lsp is not running in this buffer (M-x eglot, or see `kernel-lsp-setup')"))
    server))

(defun kernel-lsp--offered (server)
  "The commands SERVER advertises."
  (append (plist-get (plist-get (eglot--capabilities server) :executeCommandProvider) :commands) nil))

(defun kernel-lsp-position-argument ()
  "The position argument of a server command: this buffer's uri and point, as {uri, line, character}."
  (let ((params (eglot--TextDocumentPositionParams)))
    (list :uri (plist-get (plist-get params :textDocument) :uri)
          :line (plist-get (plist-get params :position) :line)
          :character (plist-get (plist-get params :position) :character))))

(defun kernel-lsp-execute-command (command &optional arguments)
  "Run the server's COMMAND with ARGUMENTS (a vector) and return its result.
A result with an :error key is reported as an error."
  (let* ((server (kernel-lsp--server))
         (result (jsonrpc-request server :workspace/executeCommand
                                  (list :command command :arguments (or arguments [])))))
    (when (and (listp result) (plist-get result :error))
      (user-error "kernel-lsp: %s" (plist-get result :error)))
    result))

(defun kernel-lsp--format (value &optional indent)
  (let ((pad (make-string (or indent 0) ?\s)))
    (if (and (consp value) (keywordp (car value)))
        (mapconcat (lambda (pair)
                     (let ((key (substring (symbol-name (car pair)) 1)) (v (cdr pair)))
                       (if (and (consp v) (keywordp (car v)))
                           (format "%s%s:\n%s" pad key (kernel-lsp--format v (+ 2 (or indent 0))))
                         (format "%s%s: %s" pad key (kernel-lsp--format-value v)))))
                   (cl-loop for (k v) on value by #'cddr collect (cons k v))
                   "\n")
      (concat pad (kernel-lsp--format-value value)))))

(defun kernel-lsp--format-value (v)
  (cond ((vectorp v) (mapconcat #'kernel-lsp--format-value v ", "))
        ((eq v :json-false) "false")
        ((eq v t) "true")
        ((null v) "null")
        ((stringp v) v)
        (t (format "%s" v))))

(defun kernel-lsp-status ()
  "Show what the server is doing: indexed files, queued work, compile counters, memory."
  (interactive)
  (let ((status (kernel-lsp-execute-command "kernel-lsp.status")))
    (with-current-buffer (get-buffer-create "*kernel-lsp status*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (kernel-lsp--format status) "\n"))
      (special-mode)
      (display-buffer (current-buffer)))
    status))

(defun kernel-lsp-reindex ()
  "Forget what is known of closed files and index the workspace again."
  (interactive)
  (let* ((status (kernel-lsp-execute-command "kernel-lsp.reindex"))
         (n (plist-get status :indexed)))
    (message "kernel-lsp: indexed %s files, %s Triton and %s NKI kernels"
             (plist-get n :files) (plist-get n :tritonKernels) (plist-get n :nkiKernels))
    status))

(defvar-local kernel-lsp--ir-server nil
  "The kernel-lsp server that wrote this Show IR buffer's file: it maps the buffer's lines to source lines.")

(define-minor-mode kernel-lsp-ir-mode
  "A Show IR buffer: \\[xref-find-definitions] on a line jumps to the source line it was compiled from.
The jump asks the server that wrote the file, so no tags table is involved."
  :lighter " IR"
  (if kernel-lsp-ir-mode
      (add-hook 'xref-backend-functions #'kernel-lsp--ir-xref-backend nil t)
    (remove-hook 'xref-backend-functions #'kernel-lsp--ir-xref-backend t)))

(defun kernel-lsp--ir-xref-backend ()
  (and kernel-lsp--ir-server 'kernel-lsp-ir))

(defun kernel-lsp--path-uri (path)
  (if (fboundp 'eglot-path-to-uri) (eglot-path-to-uri path) (eglot--path-to-uri path)))

(defun kernel-lsp--uri-path (uri)
  (if (fboundp 'eglot-uri-to-path) (eglot-uri-to-path uri) (eglot--uri-to-path uri)))

(cl-defmethod xref-backend-identifier-at-point ((_backend (eql kernel-lsp-ir)))
  (let ((line (1- (line-number-at-pos))))
    (propertize (format "IR line %d" (1+ line)) 'kernel-lsp-line line)))

(cl-defmethod xref-backend-identifier-completion-table ((_backend (eql kernel-lsp-ir)))
  nil)

(cl-defmethod xref-backend-definitions ((_backend (eql kernel-lsp-ir)) identifier)
  (let* ((line (or (get-text-property 0 'kernel-lsp-line identifier) (1- (line-number-at-pos))))
         (found (jsonrpc-request kernel-lsp--ir-server :textDocument/definition
                                 (list :textDocument (list :uri (kernel-lsp--path-uri buffer-file-name))
                                       :position (list :line line :character 0))))
         (locations (cond ((vectorp found) (append found nil)) (found (list found)))))
    (mapcar (lambda (location)
              (let* ((start (plist-get (plist-get location :range) :start))
                     (path (kernel-lsp--uri-path (plist-get location :uri))))
                (xref-make (format "%s:%d" (file-name-nondirectory path) (1+ (plist-get start :line)))
                           (xref-make-file-location path (1+ (plist-get start :line))
                                                    (plist-get start :character)))))
            locations)))

(defun kernel-lsp-show-ir (&optional stage)
  "Open the compiled IR (STAGE: ttgir by default; ttir, llir, ptx, sass, amdgcn) of the kernel at point."
  (interactive (list (let ((s (completing-read "IR stage (default ttgir): "
                                               '("ttir" "ttgir" "llir" "ptx" "sass" "amdgcn") nil nil)))
                       (unless (string-empty-p s) s))))
  (let* ((server (kernel-lsp--server))
         (argument (append (kernel-lsp-position-argument) (and stage (list :stage stage))))
         (result (kernel-lsp-execute-command "kernel-lsp.showIR" (vector argument)))
         (path (plist-get result :path))
         (lines (plist-get result :lines)))
    (when path
      (find-file-other-window path)
      (setq kernel-lsp--ir-server server)
      (kernel-lsp-ir-mode 1)
      (when (and lines (> (length lines) 0))
        (goto-char (point-min))
        (forward-line (aref lines 0))))
    result))

(defun kernel-lsp-execute (command)
  "Run any COMMAND the server offers, with the position at point as its argument."
  (interactive (list (completing-read "kernel-lsp command: " (kernel-lsp--offered (kernel-lsp--server)) nil t)))
  (let ((result (kernel-lsp-execute-command command (vector (kernel-lsp-position-argument)))))
    (message "%s" (kernel-lsp--format result))
    result))

(provide 'kernel-lsp)
;;; kernel-lsp.el ends here
