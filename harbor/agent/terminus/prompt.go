package terminus

import (
	"fmt"
	"strings"
)

// systemPrompt tells the model what it is and how to answer.
const systemPrompt = `You are an autonomous agent solving a task in a Linux sandbox. You work only through a terminal: you type keys into a shell and read what it prints. Nobody else will answer you.

Answer every turn with exactly one JSON object and nothing else:

{
  "analysis": "what the terminal shows and what it means for the task",
  "plan": "what you will do next, and why",
  "commands": [
    {"keystrokes": "ls -la\n", "duration": 0.5}
  ],
  "task_complete": false
}

Rules:
- "keystrokes" is typed into the terminal exactly as written. End a command with "\n" to run it. A single key name on its own (C-c, C-d, Tab, Enter, Escape, Up, Down) is pressed as that key; C-c stops a running command.
- "duration" is how many seconds to wait for that command, at most 60. The wait ends as soon as the shell is back at its prompt, so being generous costs nothing; a command still running when it ends keeps running, and you can wait more with an empty command list.
- The commands run in order. Then you get the terminal's new output, shortened in the middle when it is long.
- The shell keeps its state between commands (working directory, variables). Do not start editors or other full-screen programs; write files with printf, sed, or cat with a here-document.
- Set "task_complete" to true only when the task is done and you have checked it. You will be asked once to confirm; confirming ends your work and the result is graded.`

func firstMessage(instruction, kind, screen string) string {
	var b strings.Builder
	b.WriteString("Task:\n")
	b.WriteString(strings.TrimSpace(instruction))
	fmt.Fprintf(&b, "\n\nYou are in a shell (%s). The terminal shows:\n", kindText(kind))
	b.WriteString(outputText(screen))
	return b.String()
}

func kindText(kind string) string {
	if kind == "tmux" {
		return "a tmux terminal"
	}
	return "no terminal: a plain shell reading your keystrokes, so only C-c, Tab, Enter and Escape work as keys"
}

func outputText(out string) string {
	if strings.TrimSpace(out) == "" {
		return "(nothing new)\n"
	}
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// observation is the user message after a turn's commands.
func observation(out string, notes []string, confirm bool) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("Note: " + n + "\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("New terminal output:\n")
	b.WriteString(outputText(out))
	if confirm {
		b.WriteString("\nYou marked the task complete. Confirming ends your work, and the result is graded as it is now. " +
			"If you are sure, answer again with \"task_complete\": true; otherwise keep working.")
	}
	return b.String()
}

func parseFeedback(err error) string {
	return fmt.Sprintf("Your answer could not be used: %v.\n\nAnswer with exactly one JSON object: "+
		`{"analysis": "...", "plan": "...", "commands": [{"keystrokes": "...", "duration": 1.0}], "task_complete": false}`, err)
}

const cutFeedback = "Your answer was cut off at the output limit before it was complete. Answer again, shorter: fewer commands, or smaller ones."
