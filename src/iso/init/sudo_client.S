/* sbx-init: the sandbox's sudo client (share/sbx/sudo), which init puts
   at /usr/bin/sudo in the sandbox (rootfs.c, SBX_PLAN_SUDO). */
	.section .rodata
	.global sbx_sudo_client
	.global sbx_sudo_client_end
sbx_sudo_client:
	.incbin "share/sbx/sudo"
sbx_sudo_client_end:
	.section .note.GNU-stack,"",@progbits
