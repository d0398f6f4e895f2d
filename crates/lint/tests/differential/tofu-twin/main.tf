this is not valid HCL at all {{{
