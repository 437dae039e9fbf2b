#compdef trainctl

_trainctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _TRAINCTL_COMPLETE=complete_zsh trainctl)
}

compdef _trainctl_completion trainctl
