//! Build-time checks of values whose syntax another tool defines (crypt hashes, SSH keys, apt names).
