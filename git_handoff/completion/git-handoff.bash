# bash completion for git handoff: `git handoff <TAB>` (git's own completion calls
# _git_handoff for the `handoff` subcommand) and `git-handoff <TAB>`.
# Printed by `git handoff completion bash`; `--install` puts it where bash-completion
# (and git's completion, through it) finds it.

_git_handoff() {
    local -a line
    local at i n kind value
    if [[ -n ${cword-} && ${#words[@]} -gt 0 ]]; then  # inside git's completion
        line=("${words[@]}"); at=$cword
    else
        line=("${COMP_WORDS[@]}"); at=$COMP_CWORD
    fi
    n=-1
    for ((i = 0; i < at; i++)); do
        case ${line[i]} in handoff|git-handoff|*/git-handoff) n=$i; break ;; esac
    done
    ((n < 0)) && return 0
    local asked="git-handoff ${line[*]:n+1}"
    local IFS=$'\n'
    local -a answer
    answer=($(COMP_WORDS="$asked" COMP_CWORD=$((at - n)) \
        _GIT_HANDOFF_COMPLETE=bash_complete git handoff 2>/dev/null))
    COMPREPLY=()
    for value in "${answer[@]}"; do
        kind=${value%%,*}; value=${value#*,}
        case $kind in
            plain) COMPREPLY+=("$value") ;;
            file) COMPREPLY+=($(compgen -f -- "${line[at]}")) ;;
            dir) COMPREPLY+=($(compgen -d -- "${line[at]}")) ;;
        esac
    done
    return 0
}

complete -o nosort -o bashdefault -F _git_handoff git-handoff 2>/dev/null ||
    complete -o bashdefault -F _git_handoff git-handoff
