//! Escaping of spec values for the contexts they reach (shell, unit files, paths).
