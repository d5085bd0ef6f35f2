/**
 * A context reply with its renderings.
 *
 * @module
 */

import { contextMessages, contextText } from "./render.js";
import type { ChatMessage } from "./render.js";
import type { ContextReply } from "./wire.js";

// The reply's fields are the wire's (ContextReply): the class and this
// interface merge.
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface Context extends ContextReply {}

/**
 * The reply of the context endpoint (every field of {@link ContextReply}),
 * with `messages()` and `text()` to put it into a prompt.
 * `JSON.stringify` gives the reply as the service sent it.
 */
export class Context {
  constructor(reply: ContextReply) {
    Object.assign(this, reply);
  }

  /**
   * The context as OpenAI chat-completions messages: one system message
   * holding the summary, remembered facts and earlier excerpts with their
   * dates (when there are any), then the verbatim turns as user and
   * assistant messages by role, oldest first.
   */
  messages(): ChatMessage[] {
    return contextMessages(this);
  }

  /**
   * The context as prompt text, one line per item: the text the
   * `processor context` command prints after its header line. Its length
   * in characters is `chars`, so it stays within the requested budget.
   */
  text(): string {
    return contextText(this);
  }
}
