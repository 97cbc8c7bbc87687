/* sbx: the microVM guest agent, embedded into the daemon's .rodata. */
	.section .rodata
	.global sbx_vm_agent_blob
	.global sbx_vm_agent_blob_end
	.balign 64
sbx_vm_agent_blob:
	.incbin SBX_VM_AGENT_PATH
sbx_vm_agent_blob_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
