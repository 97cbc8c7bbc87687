/* sbx: the in-sandbox init binary, embedded into the daemon's .rodata. */
	.section .rodata
	.global sbx_init_blob
	.global sbx_init_blob_end
	.balign 64
sbx_init_blob:
	.incbin SBX_INIT_PATH
sbx_init_blob_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
